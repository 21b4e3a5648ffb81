"""Job control: the queue's tables (jobs, workers), the attempt and failure code of
events and runs, and metric key ids that are never reused.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("reason_code", sa.String(64)))
        batch.add_column(sa.Column("attempt", sa.Integer, nullable=False, server_default="1"))
    with op.batch_alter_table("events") as batch:
        batch.add_column(sa.Column("attempt", sa.Integer))
        batch.add_column(sa.Column("code", sa.String(64)))
    if op.get_bind().dialect.name == "sqlite":
        # AUTOINCREMENT, so a deleted key's id is never given to a new key
        with op.batch_alter_table("metric_keys", recreate="always",
                                  table_kwargs={"sqlite_autoincrement": True}):
            pass
    op.create_table(
        "jobs",
        sa.Column("run_pk", sa.Integer, sa.ForeignKey("runs.pk", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("recipe", sa.String(16)),
        sa.Column("argv", sa.Text, nullable=False),
        sa.Column("cwd", sa.Text, nullable=False),
        sa.Column("devices", sa.Integer, nullable=False),
        sa.Column("device_profile", sa.String(64), nullable=False),
        sa.Column("priority", sa.Integer, nullable=False),
        sa.Column("max_attempts", sa.Integer, nullable=False),
        sa.Column("startup_timeout_s", sa.Float),
        sa.Column("submitted_at", sa.Float, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("worker_id", sa.String(64)),
        sa.Column("claimed_at", sa.Float),
        sa.Column("heartbeat_at", sa.Float),
        sa.Column("pid", sa.Integer),
        sa.Column("cancel_requested_at", sa.Float),
    )
    op.create_index("ix_jobs_worker", "jobs", ["worker_id"])
    op.create_table(
        "workers",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("host", sa.String(256), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("devices", sa.Integer, nullable=False),
        sa.Column("device_profile", sa.String(64), nullable=False),
        sa.Column("started_at", sa.Float, nullable=False),
        sa.Column("heartbeat_at", sa.Float, nullable=False),
        sa.Column("draining", sa.Boolean, nullable=False),
        sa.Column("stopped_at", sa.Float),
    )


def downgrade() -> None:
    op.drop_table("workers")
    op.drop_index("ix_jobs_worker", "jobs")
    op.drop_table("jobs")
    # ALTER TABLE … DROP COLUMN (SQLite 3.35 and later too), not a batch copy of the table:
    # on SQLite dropping the old `runs` would cascade to every table that refers to it
    for table, column in (("events", "code"), ("events", "attempt"), ("runs", "attempt"),
                          ("runs", "reason_code")):
        op.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
