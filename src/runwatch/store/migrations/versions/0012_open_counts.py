"""Each run's open findings by severity, as listed (one per incident), in its health_state
row (open_info, open_warning, open_critical): the health store counts them where it writes
findings, so /metrics sums a row a run, where it read every finding of the runs with one
open at each scrape. The runs with an open finding are counted here, as the store counts
them (runwatch.health.store.recount_open); the others read 0.

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from alembic import op

from runwatch.health.store import recount_open

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

SEVERITIES = ("info", "warning", "critical")


def upgrade() -> None:
    with op.batch_alter_table("health_state") as batch:
        for severity in SEVERITIES:
            batch.add_column(sa.Column(f"open_{severity}", sa.Integer, nullable=False,
                                       server_default="0"))
    recount_open(op.get_bind())


def downgrade() -> None:
    # ALTER TABLE … DROP COLUMN, as 0009 does: no batch copy of the table
    for severity in SEVERITIES:
        op.execute(f"ALTER TABLE health_state DROP COLUMN open_{severity}")
