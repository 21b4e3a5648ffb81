"""Each worker's heartbeat timeout (workers.heartbeat_timeout_s): a worker declares it as
it registers, and it is lost once its own last heartbeat is older than that, for the
workers view and for reaping alike (runwatch.store.jobs.lost). Workers registered before
it ran with the default: their rows read 30 s.

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.add_column(sa.Column("heartbeat_timeout_s", sa.Float, nullable=False,
                                   server_default="30"))


def downgrade() -> None:
    # ALTER TABLE … DROP COLUMN, as 0009 does: no batch copy of the table
    op.execute("ALTER TABLE workers DROP COLUMN heartbeat_timeout_s")
