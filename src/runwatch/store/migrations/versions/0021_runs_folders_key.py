"""runs_folders keyed by a hash of the path (`path_key`, sha256 hex of its bytes), the path
kept beside it: PostgreSQL cannot key a text over about 2.7 KB (a btree entry holds at most
a third of a page), so a pass over a runs folder whose path was longer failed at every
pass on PostgreSQL, and nothing of that folder was indexed. Every row is kept.

Revision ID: 0021
Revises: 0020
"""

import hashlib
import os

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

# What the old key can hold on PostgreSQL, with a margin: longer paths are left out going
# down (such a runs folder is recorded again by a pass of the newer version only).
OLD_KEY_MAX_BYTES = 2000


def _key(path: str) -> str:
    return hashlib.sha256(os.fsencode(path)).hexdigest()


def upgrade() -> None:
    rows = op.get_bind().execute(sa.text("SELECT path, dev, passed_at FROM runs_folders")).all()
    op.drop_table("runs_folders")
    table = op.create_table(
        "runs_folders",
        sa.Column("path_key", sa.String(64), primary_key=True),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("dev", sa.BigInteger, nullable=False),
        sa.Column("passed_at", sa.Float, nullable=False),
    )
    if rows:
        op.bulk_insert(table, [{"path_key": _key(path), "path": path, "dev": dev,
                                "passed_at": passed_at} for path, dev, passed_at in rows])


def downgrade() -> None:
    rows = op.get_bind().execute(sa.text("SELECT path, dev, passed_at FROM runs_folders")).all()
    op.drop_table("runs_folders")
    table = op.create_table(
        "runs_folders",
        sa.Column("path", sa.Text, primary_key=True),
        sa.Column("dev", sa.BigInteger, nullable=False),
        sa.Column("passed_at", sa.Float, nullable=False),
    )
    kept = [{"path": path, "dev": dev, "passed_at": passed_at} for path, dev, passed_at in rows
            if len(os.fsencode(path)) <= OLD_KEY_MAX_BYTES]
    if kept:
        op.bulk_insert(table, kept)
