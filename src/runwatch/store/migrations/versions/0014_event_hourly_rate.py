"""The rate per device-hour an attempt was started at (events.hourly_rate, on the worker's
PREPARING event): an attempt is priced at it, so a later change of its device profile's
rate does not re-price it. Events indexed before it ran have none; such an attempt is
priced at its profile's rate, as before.

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


def downgrade() -> None:
    # ALTER TABLE … DROP COLUMN, as 0009 does: no batch copy of the table
    op.execute("ALTER TABLE events DROP COLUMN hourly_rate")
