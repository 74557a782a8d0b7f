"""outbox: claim time, unsettled sends, delivered chunks

Revision ID: 0007_b_delivery
Revises: 0003
Create Date: 2026-12-02 19:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from agent_core.db.base import UTCDateTime


revision: str = '0007_b_delivery'
down_revision: str | None = '0003'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('outbox', schema=None) as batch_op:
        batch_op.add_column(sa.Column('claimed_at', UTCDateTime(), nullable=True))
        batch_op.add_column(sa.Column('unsettled_since', UTCDateTime(), nullable=True))
        batch_op.add_column(
            sa.Column('delivered_chunks', sa.Integer(), server_default=sa.text('0'), nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table('outbox', schema=None) as batch_op:
        batch_op.drop_column('delivered_chunks')
        batch_op.drop_column('unsettled_since')
        batch_op.drop_column('claimed_at')
