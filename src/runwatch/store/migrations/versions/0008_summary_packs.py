"""Step summaries packed: the buckets of each closed chunk of a level in one row
(metric_summary_packs), so a whole series crosses the driver as a few rows, not a row a
bucket. The summaries an index holds are packed on the way up and unpacked on the way
down (runwatch.store.summaries.repack / unpack).

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

from runwatch.store.summaries import repack, unpack

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "metric_summary_packs",
        sa.Column("key_id", sa.Integer, sa.ForeignKey("metric_keys.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("level", sa.Integer, primary_key=True),
        sa.Column("chunk", sa.BigInteger, primary_key=True),
        sa.Column("data", sa.LargeBinary, nullable=False),
        sqlite_with_rowid=False,
    )
    repack(op.get_bind())


def downgrade() -> None:
    unpack(op.get_bind())
    op.drop_table("metric_summary_packs")
