"""media: images people sent, referenced from messages, bytes in their own table

Revision ID: 0018_i_media
Revises: 0016_m_busy_mode
Create Date: 2026-12-02 10:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from agent_core.db.base import UTCDateTime


revision: str = '0018_i_media'
down_revision: str | None = '0016_m_busy_mode'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigIntId = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')


def upgrade() -> None:
    op.create_table('media',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('tenant_id', sa.String(length=64), nullable=False),
    sa.Column('session_id', sa.String(length=32), nullable=False),
    sa.Column('message_id', BigIntId, nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('platform_ref', sa.String(length=2048), nullable=False),
    sa.Column('filename', sa.String(length=255), nullable=False),
    sa.Column('width', sa.Integer(), nullable=True),
    sa.Column('height', sa.Integer(), nullable=True),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('reason', sa.String(length=200), nullable=True),
    sa.Column('sha256', sa.String(length=64), nullable=True),
    sa.Column('content_type', sa.String(length=64), nullable=True),
    sa.Column('size_bytes', sa.Integer(), nullable=True),
    sa.Column('created_at', UTCDateTime(), server_default=sa.text('CURRENT_TIMESTAMP'), nullable=False),
    sa.ForeignKeyConstraint(['message_id'], ['messages.id'], name=op.f('fk_media_message_id_messages'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['session_id'], ['sessions.id'], name=op.f('fk_media_session_id_sessions'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], name=op.f('fk_media_tenant_id_tenants'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_media'))
    )
    with op.batch_alter_table('media', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_media_message_id'), ['message_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_media_session_id'), ['session_id'], unique=False)

    op.create_table('media_blobs',
    sa.Column('media_id', sa.String(length=32), nullable=False),
    sa.Column('data', sa.LargeBinary(), nullable=False),
    sa.ForeignKeyConstraint(['media_id'], ['media.id'], name=op.f('fk_media_blobs_media_id_media'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('media_id', name=op.f('pk_media_blobs'))
    )


def downgrade() -> None:
    op.drop_table('media_blobs')
    with op.batch_alter_table('media', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_media_session_id'))
        batch_op.drop_index(batch_op.f('ix_media_message_id'))
    op.drop_table('media')
