"""tenant settings (instructions, bot defaults); a bot's trigger mode may inherit

Revision ID: 0013_t_tenant_settings
Revises: 0012_u_usage
Create Date: 2026-12-02 06:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0013_t_tenant_settings'
down_revision: str | None = '0012_u_usage'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('tenants', schema=None) as batch_op:
        batch_op.add_column(
            sa.Column('settings', sa.JSON(), server_default=sa.text("'{}'"), nullable=False)
        )
    with op.batch_alter_table('bots', schema=None) as batch_op:
        batch_op.alter_column(
            'trigger_mode', existing_type=sa.String(length=16), nullable=True
        )


def downgrade() -> None:
    op.execute("UPDATE bots SET trigger_mode = 'mention' WHERE trigger_mode IS NULL")
    with op.batch_alter_table('bots', schema=None) as batch_op:
        batch_op.alter_column(
            'trigger_mode', existing_type=sa.String(length=16), nullable=False
        )
    with op.batch_alter_table('tenants', schema=None) as batch_op:
        batch_op.drop_column('settings')
