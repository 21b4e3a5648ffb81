"""Each worker's runs folder (workers.runs_dir): a worker claims only the jobs whose folder
is inside it, so the submit that names the workers that will start a job names those
alone (it named a worker of another folder, which never would). Workers registered
before it ran have none: they are counted as they were.

Revision ID: 0013
Revises: 0012
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.add_column(sa.Column("runs_dir", sa.Text, nullable=True))


def downgrade() -> None:
    # ALTER TABLE … DROP COLUMN, as 0009 does: no batch copy of the table
    op.execute("ALTER TABLE workers DROP COLUMN runs_dir")
