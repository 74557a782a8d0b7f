"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-29 15:25:00.158785
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from agent_core.db.base import UTCDateTime


revision: str = '0001'
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('tenants',
    sa.Column('id', sa.String(length=64), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('persona', sa.Text(), nullable=True),
    sa.Column('created_at', UTCDateTime(), server_default=sa.text('CURRENT_TIMESTAMP'), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_tenants'))
    )
    op.create_table('bots',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('tenant_id', sa.String(length=64), nullable=False),
    sa.Column('platform', sa.String(length=32), nullable=False),
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('trigger_mode', sa.String(length=16), nullable=False),
    sa.Column('answer_bots', sa.Boolean(), nullable=False),
    sa.Column('credentials', sa.Text(), nullable=True),
    sa.Column('settings', sa.JSON(), nullable=False),
    sa.Column('created_at', UTCDateTime(), server_default=sa.text('CURRENT_TIMESTAMP'), nullable=False),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], name=op.f('fk_bots_tenant_id_tenants'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_bots')),
    sa.UniqueConstraint('tenant_id', 'platform', 'name', name=op.f('uq_bots_tenant_id_platform_name'))
    )
    op.create_table('memory_entries',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('tenant_id', sa.String(length=64), nullable=False),
    sa.Column('bot_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('subject', sa.String(length=128), nullable=True),
    sa.Column('content', sa.Text(), nullable=False),
    sa.Column('created_at', UTCDateTime(), server_default=sa.text('CURRENT_TIMESTAMP'), nullable=False),
    sa.ForeignKeyConstraint(['bot_id'], ['bots.id'], name=op.f('fk_memory_entries_bot_id_bots'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], name=op.f('fk_memory_entries_tenant_id_tenants'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_memory_entries'))
    )
    with op.batch_alter_table('memory_entries', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_memory_entries_tenant_id'), ['tenant_id'], unique=False)

    op.create_table('sessions',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('tenant_id', sa.String(length=64), nullable=False),
    sa.Column('bot_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('key', sa.String(length=512), nullable=False),
    sa.Column('platform', sa.String(length=32), nullable=False),
    sa.Column('chat_id', sa.String(length=128), nullable=False),
    sa.Column('thread_id', sa.String(length=128), nullable=False),
    sa.Column('chat_type', sa.String(length=16), nullable=False),
    sa.Column('is_current', sa.Boolean(), nullable=False),
    sa.Column('ended_at', UTCDateTime(), nullable=True),
    sa.Column('next_seq', sa.Integer(), nullable=False),
    sa.Column('system_prompt', sa.Text(), nullable=True),
    sa.Column('prompt_fingerprint', sa.String(length=64), nullable=True),
    sa.Column('prompt_built_at', UTCDateTime(), nullable=True),
    sa.Column('summary', sa.Text(), nullable=True),
    sa.Column('summary_version', sa.Integer(), nullable=False),
    sa.Column('compaction_count', sa.Integer(), nullable=False),
    sa.Column('ineffective_compactions', sa.Integer(), nullable=False),
    sa.Column('compaction_cooldown_until', UTCDateTime(), nullable=True),
    sa.Column('last_prompt_tokens', sa.Integer(), nullable=False),
    sa.Column('active_tokens', sa.Integer(), nullable=False),
    sa.Column('tokens_spent', sa.Integer(), nullable=False),
    sa.Column('created_at', UTCDateTime(), server_default=sa.text('CURRENT_TIMESTAMP'), nullable=False),
    sa.ForeignKeyConstraint(['bot_id'], ['bots.id'], name=op.f('fk_sessions_bot_id_bots'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], name=op.f('fk_sessions_tenant_id_tenants'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_sessions'))
    )
    with op.batch_alter_table('sessions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_sessions_key'), ['key'], unique=False)
        batch_op.create_index(batch_op.f('ix_sessions_tenant_id'), ['tenant_id'], unique=False)
        batch_op.create_index('uq_sessions_current_key', ['key'], unique=True, postgresql_where=sa.text('is_current'), sqlite_where=sa.text('is_current'))

    op.create_table('messages',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('session_id', sa.String(length=32), nullable=False),
    sa.Column('bot_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('seq', sa.Integer(), nullable=False),
    sa.Column('anchor_seq', sa.Integer(), nullable=False),
    sa.Column('role', sa.String(length=16), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('speaker_id', sa.String(length=128), nullable=True),
    sa.Column('speaker_name', sa.String(length=200), nullable=True),
    sa.Column('content', sa.Text(), nullable=True),
    sa.Column('tool_calls', sa.JSON(), nullable=True),
    sa.Column('tool_call_id', sa.String(length=128), nullable=True),
    sa.Column('name', sa.String(length=128), nullable=True),
    sa.Column('platform_message_id', sa.String(length=128), nullable=True),
    sa.Column('reply_to_platform_id', sa.String(length=128), nullable=True),
    sa.Column('turn_state', sa.String(length=16), nullable=False),
    sa.Column('token_count', sa.Integer(), nullable=False),
    sa.Column('token_encoding', sa.String(length=32), nullable=True),
    sa.Column('archived', sa.Boolean(), nullable=False),
    sa.Column('compaction_id', sa.Integer(), nullable=True),
    sa.Column('edited_at', UTCDateTime(), nullable=True),
    sa.Column('deleted', sa.Boolean(), nullable=False),
    sa.Column('meta', sa.JSON(), nullable=False),
    sa.Column('created_at', UTCDateTime(), server_default=sa.text('CURRENT_TIMESTAMP'), nullable=False),
    sa.ForeignKeyConstraint(['bot_id'], ['bots.id'], name=op.f('fk_messages_bot_id_bots'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['session_id'], ['sessions.id'], name=op.f('fk_messages_session_id_sessions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_messages')),
    sa.UniqueConstraint('bot_id', 'platform_message_id', name=op.f('uq_messages_bot_id_platform_message_id')),
    sa.UniqueConstraint('session_id', 'seq', name=op.f('uq_messages_session_id_seq'))
    )
    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.create_index('ix_messages_session_active', ['session_id', 'archived', 'anchor_seq'], unique=False)
        batch_op.create_index('ix_messages_session_turn', ['session_id', 'turn_state', 'seq'], unique=False)
        batch_op.create_index('ix_messages_turn_state', ['turn_state'], unique=False)

    op.create_table('session_locks',
    sa.Column('session_id', sa.String(length=32), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('owner', sa.String(length=64), nullable=False),
    sa.Column('expires_at', UTCDateTime(), nullable=False),
    sa.Column('acquired_at', UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['session_id'], ['sessions.id'], name=op.f('fk_session_locks_session_id_sessions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('session_id', 'kind', name=op.f('pk_session_locks'))
    )
    op.create_table('outbox',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('session_id', sa.String(length=32), nullable=False),
    sa.Column('bot_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('trigger_message_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('reply_message_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('platform', sa.String(length=32), nullable=False),
    sa.Column('chat_id', sa.String(length=128), nullable=False),
    sa.Column('thread_id', sa.String(length=128), nullable=False),
    sa.Column('reply_to_platform_id', sa.String(length=128), nullable=True),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('next_attempt_at', UTCDateTime(), nullable=True),
    sa.Column('claimed_until', UTCDateTime(), nullable=True),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.Column('platform_message_ids', sa.JSON(), nullable=False),
    sa.Column('sent_at', UTCDateTime(), nullable=True),
    sa.Column('meta', sa.JSON(), nullable=False),
    sa.Column('created_at', UTCDateTime(), server_default=sa.text('CURRENT_TIMESTAMP'), nullable=False),
    sa.ForeignKeyConstraint(['bot_id'], ['bots.id'], name=op.f('fk_outbox_bot_id_bots'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['reply_message_id'], ['messages.id'], name=op.f('fk_outbox_reply_message_id_messages'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['session_id'], ['sessions.id'], name=op.f('fk_outbox_session_id_sessions'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['trigger_message_id'], ['messages.id'], name=op.f('fk_outbox_trigger_message_id_messages'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_outbox')),
    sa.UniqueConstraint('trigger_message_id', name=op.f('uq_outbox_trigger_message_id'))
    )
    with op.batch_alter_table('outbox', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_outbox_session_id'), ['session_id'], unique=False)
        batch_op.create_index('ix_outbox_state_next', ['state', 'next_attempt_at'], unique=False)

    tenants = sa.table('tenants', sa.column('id', sa.String), sa.column('name', sa.String))
    op.bulk_insert(tenants, [{'id': 'default', 'name': 'Default tenant'}])



def downgrade() -> None:
    with op.batch_alter_table('outbox', schema=None) as batch_op:
        batch_op.drop_index('ix_outbox_state_next')
        batch_op.drop_index(batch_op.f('ix_outbox_session_id'))

    op.drop_table('outbox')
    op.drop_table('session_locks')
    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.drop_index('ix_messages_turn_state')
        batch_op.drop_index('ix_messages_session_turn')
        batch_op.drop_index('ix_messages_session_active')

    op.drop_table('messages')
    with op.batch_alter_table('sessions', schema=None) as batch_op:
        batch_op.drop_index('uq_sessions_current_key', postgresql_where=sa.text('is_current'), sqlite_where=sa.text('is_current'))
        batch_op.drop_index(batch_op.f('ix_sessions_tenant_id'))
        batch_op.drop_index(batch_op.f('ix_sessions_key'))

    op.drop_table('sessions')
    with op.batch_alter_table('memory_entries', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_memory_entries_tenant_id'))

    op.drop_table('memory_entries')
    op.drop_table('bots')
    op.drop_table('tenants')
