"""a session's model (/model); NULL: its tenant's default, else HUBBUB_MODEL

Revision ID: 0019_r_session_model
Revises: 0018_i_media
Create Date: 2026-12-02 14:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0019_r_session_model'
down_revision: str | None = '0018_i_media'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('sessions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('model', sa.String(length=200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('sessions', schema=None) as batch_op:
        batch_op.drop_column('model')
