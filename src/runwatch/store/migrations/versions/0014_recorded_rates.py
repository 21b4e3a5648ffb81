"""The rates per device-hour a worker ran at: each attempt's (events.hourly_rate, on the
worker's PREPARING event) and each worker's (workers.hourly_rate, when it registered), so a
later change of a device profile's rate prices what runs after it and re-prices nothing
that ran before. Rows from before it have none; they are priced at their profile's rate
now, as before.

Revision ID: 0014
Revises: 0013
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("events") as batch:
        batch.add_column(sa.Column("hourly_rate", sa.Float, nullable=True))
    with op.batch_alter_table("workers") as batch:
        batch.add_column(sa.Column("hourly_rate", sa.Float, nullable=True))


def downgrade() -> None:
    # ALTER TABLE … DROP COLUMN, as 0009 does: no batch copy of the table
    op.execute("ALTER TABLE workers DROP COLUMN hourly_rate")
    op.execute("ALTER TABLE events DROP COLUMN hourly_rate")
