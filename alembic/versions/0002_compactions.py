"""compactions

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 16:09:16.034147
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from agent_core.db.base import UTCDateTime


revision: str = '0002'
down_revision: str | None = '0001'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('compactions',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('session_id', sa.String(length=32), nullable=False),
    sa.Column('trigger', sa.String(length=16), nullable=False),
    sa.Column('strategy', sa.String(length=24), nullable=False),
    sa.Column('fallback_used', sa.Boolean(), nullable=False),
    sa.Column('summary_model', sa.String(length=200), nullable=True),
    sa.Column('model_fallback_used', sa.Boolean(), nullable=False),
    sa.Column('tokens_before', sa.Integer(), nullable=False),
    sa.Column('tokens_after', sa.Integer(), nullable=False),
    sa.Column('archived_count', sa.Integer(), nullable=False),
    sa.Column('rewritten_count', sa.Integer(), nullable=False),
    sa.Column('summary', sa.Text(), nullable=False),
    sa.Column('summary_version', sa.Integer(), nullable=False),
    sa.Column('previous_summary', sa.Text(), nullable=True),
    sa.Column('focus_topic', sa.Text(), nullable=True),
    sa.Column('summary_calls', sa.Integer(), nullable=False),
    sa.Column('max_summary_request_tokens', sa.Integer(), nullable=False),
    sa.Column('cpu_ms', sa.Double(), nullable=True),
    sa.Column('wall_ms', sa.Double(), nullable=True),
    sa.Column('identifiers_carried', sa.JSON(), nullable=False),
    sa.Column('identifiers_dropped', sa.JSON(), nullable=False),
    sa.Column('restored', sa.Boolean(), nullable=False),
    sa.Column('meta', sa.JSON(), nullable=False),
    sa.Column('created_at', UTCDateTime(), server_default=sa.text('CURRENT_TIMESTAMP'), nullable=False),
    sa.ForeignKeyConstraint(['session_id'], ['sessions.id'], name=op.f('fk_compactions_session_id_sessions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_compactions'))
    )
    with op.batch_alter_table('compactions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_compactions_session_id'), ['session_id'], unique=False)

    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.alter_column(
            'compaction_id',
            existing_type=sa.Integer(),
            type_=sa.BigInteger().with_variant(sa.Integer(), 'sqlite'),
            existing_nullable=True,
        )
        batch_op.create_index(batch_op.f('ix_messages_compaction_id'), ['compaction_id'], unique=False)
        batch_op.create_foreign_key(batch_op.f('fk_messages_compaction_id_compactions'), 'compactions', ['compaction_id'], ['id'], ondelete='SET NULL')

    with op.batch_alter_table('sessions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('summary_anchor_seq', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('summary_seq', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('active_count', sa.Integer(), nullable=False, server_default='0'))
        batch_op.add_column(sa.Column('context_state', sa.JSON(), nullable=False, server_default='{}'))

    # Sessions created before this migration: count their active chat messages once.
    op.execute(
        "UPDATE sessions SET active_count = (SELECT count(*) FROM messages m "
        "WHERE m.session_id = sessions.id AND m.kind = 'chat' AND NOT m.archived "
        "AND NOT m.deleted)"
    )



def downgrade() -> None:
    with op.batch_alter_table('sessions', schema=None) as batch_op:
        batch_op.drop_column('context_state')
        batch_op.drop_column('active_count')
        batch_op.drop_column('summary_seq')
        batch_op.drop_column('summary_anchor_seq')

    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_messages_compaction_id_compactions'), type_='foreignkey')
        batch_op.drop_index(batch_op.f('ix_messages_compaction_id'))
        batch_op.alter_column(
            'compaction_id',
            existing_type=sa.BigInteger().with_variant(sa.Integer(), 'sqlite'),
            type_=sa.Integer(),
            existing_nullable=True,
        )

    with op.batch_alter_table('compactions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_compactions_session_id'))

    op.drop_table('compactions')
