"""session activity

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29 17:06:19.933044
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from agent_core.db.base import UTCDateTime


revision: str = '0003'
down_revision: str | None = '0002'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('sessions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('last_message_at', UTCDateTime(), nullable=True))
        batch_op.add_column(sa.Column('last_compacted_at', UTCDateTime(), nullable=True))
        batch_op.create_index(batch_op.f('ix_sessions_last_message_at'), ['last_message_at'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('sessions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_sessions_last_message_at'))
        batch_op.drop_column('last_compacted_at')
        batch_op.drop_column('last_message_at')

