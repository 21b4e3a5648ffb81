"""Step summaries packed: the buckets of each closed chunk of a level in one row
(metric_summary_packs), so a whole series crosses the driver as a few rows, not a row a
bucket. The summaries an index holds are packed on the way up and unpacked on the way
down (runwatch.store.summaries.repack / unpack).

Each way is one transaction on SQLite too: its driver opens one only at the first write,
so CREATE TABLE would commit alone, and a migration stopped while packing left the table
behind at revision 0007, and every later open failed on "table already exists".

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy import Connection

from runwatch.store.summaries import repack, unpack

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def _begin(conn: Connection) -> None:
    """Open the SQLite transaction now, before the schema changes (see the module's note);
    the migration's own transaction commits or rolls it back."""
    if conn.dialect.name == "sqlite" and not conn.connection.dbapi_connection.in_transaction:  # type: ignore[union-attr]
        conn.exec_driver_sql("BEGIN")


def upgrade() -> None:
    _begin(op.get_bind())
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
    _begin(op.get_bind())
    unpack(op.get_bind())
    op.drop_table("metric_summary_packs")
