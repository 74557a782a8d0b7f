"""tools: memory scopes, stored tool results, tenant MCP servers, message full-text search

Revision ID: 0008_g_tools
Revises: 0007_b_delivery
Create Date: 2026-12-01 20:00:00

Full-text search over message text, for ``session_search``:

- Postgres: an expression GIN index on ``to_tsvector('simple', coalesce(content, ''))``;
  queries must repeat that expression exactly to use it.
- SQLite: an FTS5 external-content table ``messages_fts`` over ``messages.content``, kept
  in sync by three triggers. A later migration that rebuilds ``messages`` in batch mode
  (SQLite's "move and copy") drops these triggers: it must create them again
  (``tests/integration/agent_core/test_session_search.py`` checks they exist at head).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from agent_core.db.base import UTCDateTime


revision: str = '0008_g_tools'
down_revision: str | None = '0007_b_delivery'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigIntId = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')

SQLITE_FTS = (
    "CREATE VIRTUAL TABLE messages_fts USING fts5("
    "content, content='messages', content_rowid='id', tokenize='unicode61')",
    "CREATE TRIGGER messages_fts_ai AFTER INSERT ON messages BEGIN "
    "INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content); END",
    "CREATE TRIGGER messages_fts_ad AFTER DELETE ON messages BEGIN "
    "INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content); END",
    "CREATE TRIGGER messages_fts_au AFTER UPDATE OF content ON messages BEGIN "
    "INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content); "
    "INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content); END",
    "INSERT INTO messages_fts(messages_fts) VALUES ('rebuild')",
)
POSTGRES_FTS = (
    "CREATE INDEX ix_messages_content_fts ON messages "
    "USING gin (to_tsvector('simple', coalesce(content, '')))"
)


def upgrade() -> None:
    with op.batch_alter_table('memory_entries', schema=None) as batch_op:
        batch_op.add_column(sa.Column('scope', sa.String(length=8), server_default='bot', nullable=False))
        batch_op.add_column(sa.Column('chat_key', sa.String(length=512), nullable=True))
        batch_op.add_column(sa.Column('author_id', sa.String(length=128), nullable=True))
        batch_op.create_index('ix_memory_entries_scope', ['tenant_id', 'bot_id', 'scope', 'subject'], unique=False)
        batch_op.create_index('ix_memory_entries_chat', ['tenant_id', 'bot_id', 'scope', 'chat_key'], unique=False)
    # Facts about one person reached every prompt of the bot before; now only theirs.
    op.execute("UPDATE memory_entries SET scope = 'user' WHERE subject IS NOT NULL")

    op.create_table('tool_results',
    sa.Column('ref', sa.String(length=64), nullable=False),
    sa.Column('session_id', sa.String(length=32), nullable=False),
    sa.Column('tenant_id', sa.String(length=64), nullable=False),
    sa.Column('tool_call_id', sa.String(length=128), nullable=False),
    sa.Column('tool_name', sa.String(length=128), nullable=False),
    sa.Column('content', sa.Text(), nullable=False),
    sa.Column('chars', sa.Integer(), nullable=False),
    sa.Column('created_at', UTCDateTime(), server_default=sa.text('CURRENT_TIMESTAMP'), nullable=False),
    sa.ForeignKeyConstraint(['session_id'], ['sessions.id'], name=op.f('fk_tool_results_session_id_sessions'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], name=op.f('fk_tool_results_tenant_id_tenants'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('ref', name=op.f('pk_tool_results'))
    )
    with op.batch_alter_table('tool_results', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_tool_results_session_id'), ['session_id'], unique=False)

    op.create_table('mcp_servers',
    sa.Column('id', BigIntId, autoincrement=True, nullable=False),
    sa.Column('tenant_id', sa.String(length=64), nullable=False),
    sa.Column('name', sa.String(length=32), nullable=False),
    sa.Column('command', sa.Text(), nullable=True),
    sa.Column('args', sa.JSON(), nullable=False),
    sa.Column('url', sa.Text(), nullable=True),
    sa.Column('secrets', sa.Text(), nullable=True),
    sa.Column('options', sa.JSON(), nullable=False),
    sa.Column('created_at', UTCDateTime(), server_default=sa.text('CURRENT_TIMESTAMP'), nullable=False),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], name=op.f('fk_mcp_servers_tenant_id_tenants'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_mcp_servers')),
    sa.UniqueConstraint('tenant_id', 'name', name=op.f('uq_mcp_servers_tenant_id_name'))
    )

    if op.get_bind().dialect.name == 'sqlite':
        for statement in SQLITE_FTS:
            op.execute(statement)
    else:
        op.execute(POSTGRES_FTS)


def downgrade() -> None:
    if op.get_bind().dialect.name == 'sqlite':
        for name in ('messages_fts_au', 'messages_fts_ad', 'messages_fts_ai'):
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
        op.execute("DROP TABLE IF EXISTS messages_fts")
    else:
        op.execute("DROP INDEX IF EXISTS ix_messages_content_fts")
    op.drop_table('mcp_servers')
    with op.batch_alter_table('tool_results', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_tool_results_session_id'))
    op.drop_table('tool_results')
    with op.batch_alter_table('memory_entries', schema=None) as batch_op:
        batch_op.drop_index('ix_memory_entries_chat')
        batch_op.drop_index('ix_memory_entries_scope')
        batch_op.drop_column('author_id')
        batch_op.drop_column('chat_key')
        batch_op.drop_column('scope')
