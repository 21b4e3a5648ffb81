"""Each worker's executor (workers.executor: local, ray), so that only a worker that can
see a lost worker's attempts reaps them (runwatch.jobs.reaper). Workers registered
before it ran jobs as local processes: their rows read `local`.

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.add_column(sa.Column("executor", sa.String(16), nullable=False,
                                   server_default="local"))


def downgrade() -> None:
    # ALTER TABLE … DROP COLUMN, as 0004 does: no batch copy of the table
    op.execute("ALTER TABLE workers DROP COLUMN executor")
