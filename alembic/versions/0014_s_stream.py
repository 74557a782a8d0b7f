"""streamed replies: the platform messages a reply is streamed into

Revision ID: 0014_s_stream
Revises: 0013_t_tenant_settings
Create Date: 2026-12-02 10:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from agent_core.db.base import UTCDateTime

revision: str = '0014_s_stream'
down_revision: str | None = '0013_t_tenant_settings'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'reply_streams',
        sa.Column(
            'trigger_message_id',
            sa.BigInteger().with_variant(sa.Integer(), 'sqlite'),
            nullable=False,
        ),
        sa.Column('bot_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
        sa.Column('message_ids', sa.JSON(), nullable=False),
        sa.Column('unsettled_since', UTCDateTime(), nullable=True),
        sa.Column('created_at', UTCDateTime(), server_default=sa.text('CURRENT_TIMESTAMP'), nullable=False),
        sa.ForeignKeyConstraint(
            ['bot_id'], ['bots.id'], name=op.f('fk_reply_streams_bot_id_bots'), ondelete='CASCADE'
        ),
        sa.ForeignKeyConstraint(
            ['trigger_message_id'],
            ['messages.id'],
            name=op.f('fk_reply_streams_trigger_message_id_messages'),
            ondelete='CASCADE',
        ),
        sa.PrimaryKeyConstraint('trigger_message_id', name=op.f('pk_reply_streams')),
    )


def downgrade() -> None:
    op.drop_table('reply_streams')
