"""Why a live worker cannot start jobs now (workers.unavailable: a Ray worker whose cluster
does not answer), written by the worker as its executor finds it, null when it can; so
`runwatch resources`, the web app and a submit's "who starts it" do not count on a worker
that claims nothing. Rows from before it have none: such a worker is taken to start jobs,
as before.

Revision ID: 0015
Revises: 0014
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.add_column(sa.Column("unavailable", sa.Text, nullable=True))


def downgrade() -> None:
    # ALTER TABLE … DROP COLUMN, as 0009 does: no batch copy of the table
    op.execute("ALTER TABLE workers DROP COLUMN unavailable")
