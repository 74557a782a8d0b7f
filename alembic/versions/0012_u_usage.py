"""usage ledger, budgets and their alerts

Revision ID: 0012_u_usage
Revises: 0011_j_admin
Create Date: 2026-12-02 04:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from agent_core.db.base import UTCDateTime


revision: str = '0012_u_usage'
down_revision: str | None = '0011_j_admin'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigIntId = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')


def upgrade() -> None:
    op.create_table('budgets',
    sa.Column('id', BigIntId, autoincrement=True, nullable=False),
    sa.Column('tenant_id', sa.String(length=64), nullable=False),
    sa.Column('scope', sa.String(length=8), nullable=False),
    sa.Column('period', sa.String(length=8), nullable=False),
    sa.Column('unit', sa.String(length=8), nullable=False),
    sa.Column('amount', sa.Float(), nullable=False),
    sa.Column('created_at', UTCDateTime(), server_default=sa.text('CURRENT_TIMESTAMP'), nullable=False),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], name=op.f('fk_budgets_tenant_id_tenants'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_budgets')),
    sa.UniqueConstraint('tenant_id', 'scope', 'period', 'unit', name=op.f('uq_budgets_tenant_id_scope_period_unit'))
    )
    with op.batch_alter_table('budgets', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_budgets_tenant_id'), ['tenant_id'], unique=False)

    op.create_table('usage_records',
    sa.Column('id', BigIntId, autoincrement=True, nullable=False),
    sa.Column('call_key', sa.String(length=200), nullable=False),
    sa.Column('tenant_id', sa.String(length=64), nullable=False),
    sa.Column('bot_id', sa.Integer(), nullable=True),
    sa.Column('session_id', sa.String(length=32), nullable=True),
    sa.Column('chat_key', sa.String(length=512), nullable=False),
    sa.Column('user_id', sa.String(length=128), nullable=True),
    sa.Column('model', sa.String(length=200), nullable=False),
    sa.Column('purpose', sa.String(length=16), nullable=False),
    sa.Column('prompt_tokens', sa.Integer(), nullable=False),
    sa.Column('completion_tokens', sa.Integer(), nullable=False),
    sa.Column('cached_tokens', sa.Integer(), nullable=False),
    sa.Column('cost_usd', sa.Float(), nullable=False),
    sa.Column('cost_known', sa.Boolean(), nullable=False),
    sa.Column('at', UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], name=op.f('fk_usage_records_tenant_id_tenants'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_usage_records')),
    sa.UniqueConstraint('call_key', name=op.f('uq_usage_records_call_key'))
    )
    with op.batch_alter_table('usage_records', schema=None) as batch_op:
        batch_op.create_index('ix_usage_records_tenant_at', ['tenant_id', 'at'], unique=False)
        batch_op.create_index('ix_usage_records_tenant_chat_at', ['tenant_id', 'chat_key', 'at'], unique=False)
        batch_op.create_index('ix_usage_records_tenant_user_at', ['tenant_id', 'user_id', 'at'], unique=False)

    op.create_table('budget_alerts',
    sa.Column('id', BigIntId, autoincrement=True, nullable=False),
    sa.Column('budget_id', BigIntId, nullable=False),
    sa.Column('subject', sa.String(length=512), nullable=False),
    sa.Column('period_label', sa.String(length=16), nullable=False),
    sa.Column('level', sa.Integer(), nullable=False),
    sa.Column('at', UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['budget_id'], ['budgets.id'], name=op.f('fk_budget_alerts_budget_id_budgets'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_budget_alerts')),
    sa.UniqueConstraint('budget_id', 'subject', 'period_label', 'level', name=op.f('uq_budget_alerts_budget_id_subject_period_label_level'))
    )


def downgrade() -> None:
    op.drop_table('budget_alerts')
    with op.batch_alter_table('usage_records', schema=None) as batch_op:
        batch_op.drop_index('ix_usage_records_tenant_user_at')
        batch_op.drop_index('ix_usage_records_tenant_chat_at')
        batch_op.drop_index('ix_usage_records_tenant_at')
    op.drop_table('usage_records')
    with op.batch_alter_table('budgets', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_budgets_tenant_id'))
    op.drop_table('budgets')
