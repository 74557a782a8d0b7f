"""a bot's busy mode (queue, collect, interrupt, steer); NULL inherits the tenant's

Revision ID: 0016_m_busy_mode
Revises: 0014_s_stream
Create Date: 2026-12-02 10:15:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0016_m_busy_mode'
down_revision: str | None = '0014_s_stream'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('bots', schema=None) as batch_op:
        batch_op.add_column(sa.Column('busy_mode', sa.String(length=16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('bots', schema=None) as batch_op:
        batch_op.drop_column('busy_mode')
