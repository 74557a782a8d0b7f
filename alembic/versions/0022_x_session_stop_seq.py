"""sessions.stop_seq: the number of the session's latest /stop

Revision ID: 0022_x_session_stop_seq
Revises: 0021_w_session_media
Create Date: 2026-12-03 12:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0022_x_session_stop_seq'
down_revision: str | None = '0021_w_session_media'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('sessions', schema=None) as batch_op:
        batch_op.add_column(
            sa.Column('stop_seq', sa.Integer(), server_default=sa.text('0'), nullable=False)
        )
    # A /stop still waiting at upgrade time must be found: every waiting command counts
    # as one here (a look too many, never one too few).
    op.execute(
        "UPDATE sessions SET stop_seq = (SELECT max(m.seq) FROM messages m"
        " WHERE m.session_id = sessions.id AND m.kind = 'command'"
        " AND m.turn_state = 'pending')"
        " WHERE EXISTS (SELECT 1 FROM messages m WHERE m.session_id = sessions.id"
        " AND m.kind = 'command' AND m.turn_state = 'pending')"
    )


def downgrade() -> None:
    with op.batch_alter_table('sessions', schema=None) as batch_op:
        batch_op.drop_column('stop_seq')
