"""Step summaries of metric series (metric_summaries, metric_summary_state).

An index made before them has none: a key's summaries are built the first time its
whole series is read (runwatch.store.summaries.ensure_summaries) or its next points
arrive.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "metric_summaries",
        sa.Column("key_id", sa.Integer, sa.ForeignKey("metric_keys.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("level", sa.Integer, primary_key=True),
        sa.Column("bucket", sa.BigInteger, primary_key=True),
        sa.Column("n", sa.BigInteger, nullable=False),
        sa.Column("last_step", sa.BigInteger, nullable=False),
        sa.Column("last_seq", sa.BigInteger, nullable=False),
        sa.Column("last_ts", sa.Float, nullable=False),
        sa.Column("min", sa.Float),
        sa.Column("max", sa.Float),
        sa.Column("last", sa.Float),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "metric_summary_state",
        sa.Column("key_id", sa.Integer, sa.ForeignKey("metric_keys.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("base", sa.Integer, nullable=False),
        sa.Column("frontier", sa.BigInteger, nullable=False),
        sa.Column("last_seq", sa.BigInteger, nullable=False),
        sa.Column("first_step", sa.BigInteger, nullable=False),
        sa.Column("fin_min", sa.Float),
        sa.Column("fin_max", sa.Float),
        sa.Column("fin_sum", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("metric_summary_state")
    op.drop_table("metric_summaries")
