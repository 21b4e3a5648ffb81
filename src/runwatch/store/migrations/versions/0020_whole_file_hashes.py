"""The size and sha256 of each whole file a sender posted (whole_file_hashes), as the server
stored it, which GET /api/ingest answers: a sender whose whole file the server holds another
version of (its database restored from a backup taken before the file's last send) sends it
again, though the server holds every record it sent.

The table starts empty: a whole file stored before this revision has no hash, and its
sender sends it again once (its next sync or catch-up), which records it.

Revision ID: 0020
Revises: 0019
"""

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "whole_file_hashes",
        sa.Column("run_pk", sa.Integer, sa.ForeignKey("runs.pk", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("file", sa.String(256), primary_key=True),
        sa.Column("size", sa.BigInteger, nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("whole_file_hashes")
