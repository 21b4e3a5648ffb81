"""Metric points keyed by one integer id (key_id * 2**36 + seq) instead of (run, key, seq).

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

SEQ_LIMIT = 2**36


def upgrade() -> None:
    op.create_table(
        "metric_points_new",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True,
                  autoincrement=False),
        sa.Column("step", sa.BigInteger, nullable=False),
        sa.Column("ts", sa.Float, nullable=False),
        sa.Column("value", sa.Float),
    )
    op.execute(
        "INSERT INTO metric_points_new (id, step, ts, value) "
        f"SELECT key_id * {SEQ_LIMIT} + seq, step, ts, value FROM metric_points "
        "ORDER BY key_id, seq"
    )
    op.drop_table("metric_points")
    op.rename_table("metric_points_new", "metric_points")


def downgrade() -> None:
    op.create_table(
        "metric_points_old",
        sa.Column("run_pk", sa.Integer, primary_key=True),
        sa.Column("key_id", sa.Integer, primary_key=True),
        sa.Column("seq", sa.BigInteger, primary_key=True),
        sa.Column("step", sa.BigInteger, nullable=False),
        sa.Column("ts", sa.Float, nullable=False),
        sa.Column("value", sa.Float),
        sqlite_with_rowid=False,
    )
    op.execute(
        "INSERT INTO metric_points_old (run_pk, key_id, seq, step, ts, value) "
        f"SELECT k.run_pk, k.id, p.id % {SEQ_LIMIT}, p.step, p.ts, p.value "
        "FROM metric_points p JOIN metric_keys k "
        f"ON k.id = p.id / {SEQ_LIMIT}"
    )
    op.drop_table("metric_points")
    op.rename_table("metric_points_old", "metric_points")
