"""Each run's open findings by severity, as listed (one per incident), in its health_state
row (open_info, open_warning, open_critical): the health store counts them where it writes
findings, so /metrics sums a row a run, where it read every finding of the runs with one
open at each scrape. The runs with an open finding are counted here, as the store counts
them (runwatch.health.store.listed_open); the others read 0.

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from alembic import op

from runwatch.health.store import listed_open

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
    conn = op.get_bind()
    findings = sa.table("findings", *(sa.column(name) for name in (
        "run_pk", "rule_id", "severity", "status", "first_step", "last_step")))
    state = sa.table("health_state", sa.column("run_pk"),
                     *(sa.column(f"open_{severity}") for severity in SEVERITIES))
    f, h = findings.c, state.c
    runs = conn.execute(sa.select(h.run_pk).where(h.run_pk.in_(
        sa.select(f.run_pk).where(f.status == "open")))).scalars().all()
    for run_pk in runs:  # one run's findings at a time, however many the index holds
        counts = listed_open(conn.execute(
            sa.select(f.rule_id, f.severity, f.status, f.first_step, f.last_step)
            .where(f.run_pk == run_pk)).mappings())
        conn.execute(sa.update(state).where(h.run_pk == run_pk).values(
            {f"open_{severity}": counts.get(severity, 0) for severity in SEVERITIES}))


def downgrade() -> None:
    # ALTER TABLE … DROP COLUMN, as 0009 does: no batch copy of the table
    for severity in SEVERITIES:
        op.execute(f"ALTER TABLE health_state DROP COLUMN open_{severity}")
