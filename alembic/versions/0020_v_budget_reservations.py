"""budget reservations: a call's estimate held until it is charged, per-tenant lock rows

Revision ID: 0020_v_budget_reservations
Revises: 0019_r_session_model
Create Date: 2026-12-02 14:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from agent_core.db.base import UTCDateTime


revision: str = '0020_v_budget_reservations'
down_revision: str | None = '0019_r_session_model'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigIntId = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')


def upgrade() -> None:
    op.create_table('budget_locks',
    sa.Column('tenant_id', sa.String(length=64), nullable=False),
    sa.Column('touched_at', UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], name=op.f('fk_budget_locks_tenant_id_tenants'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('tenant_id', name=op.f('pk_budget_locks'))
    )
    op.create_table('budget_reservations',
    sa.Column('id', BigIntId, autoincrement=True, nullable=False),
    sa.Column('holder', sa.String(length=200), nullable=False),
    sa.Column('tenant_id', sa.String(length=64), nullable=False),
    sa.Column('chat_key', sa.String(length=512), nullable=False),
    sa.Column('user_id', sa.String(length=128), nullable=True),
    sa.Column('tokens', sa.Integer(), nullable=False),
    sa.Column('cost_usd', sa.Float(), nullable=False),
    sa.Column('expires_at', UTCDateTime(), nullable=False),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], name=op.f('fk_budget_reservations_tenant_id_tenants'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_budget_reservations')),
    sa.UniqueConstraint('holder', name=op.f('uq_budget_reservations_holder'))
    )
    with op.batch_alter_table('budget_reservations', schema=None) as batch_op:
        batch_op.create_index('ix_budget_reservations_tenant_expires', ['tenant_id', 'expires_at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('budget_reservations', schema=None) as batch_op:
        batch_op.drop_index('ix_budget_reservations_tenant_expires')
    op.drop_table('budget_reservations')
    op.drop_table('budget_locks')
