"""When job control last let go of a job a worker held (workers.released_at): a lost or
stopped worker's jobs run on until a reaper concludes them, holding its devices, so its
spend (runwatch.analysis.workers) runs until the last of them is let go, not only until it
was found lost. Rows from before it have none: such a worker's spend ends where it was
found lost (or stopped), as before.

Revision ID: 0017
Revises: 0016
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.add_column(sa.Column("released_at", sa.Float, nullable=True))


def downgrade() -> None:
    # ALTER TABLE … DROP COLUMN, as 0009 does: no batch copy of the table
    op.execute("ALTER TABLE workers DROP COLUMN released_at")
