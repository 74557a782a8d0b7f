"""sessions.has_media: whether any message of the session carried images

Revision ID: 0021_w_session_media
Revises: 0020_v_budget_reservations
Create Date: 2026-12-02 19:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0021_w_session_media'
down_revision: str | None = '0020_v_budget_reservations'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('sessions', schema=None) as batch_op:
        batch_op.add_column(
            sa.Column('has_media', sa.Boolean(), server_default=sa.false(), nullable=False)
        )
    op.execute(
        "UPDATE sessions SET has_media = true"
        " WHERE id IN (SELECT DISTINCT session_id FROM media)"
    )


def downgrade() -> None:
    with op.batch_alter_table('sessions', schema=None) as batch_op:
        batch_op.drop_column('has_media')
