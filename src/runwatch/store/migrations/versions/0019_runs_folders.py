"""The runs folders the index was indexed from (runs_folders): the path as the indexer
resolves it, its device at the last pass and when that was. A run gone from one runs folder
is looked for in every other one the index knows, also those it holds no run of yet, and a
pass of one command (`runwatch index`) that finds a runs folder on another device than at
the index's last pass over it forgets nothing, as a long-lived indexer's second pass did.

The table starts empty: each runs folder's row is written by its next pass (which, having
no device to compare with, judges the folder as before).

Revision ID: 0019
Revises: 0018
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runs_folders",
        sa.Column("path", sa.Text, primary_key=True),
        sa.Column("dev", sa.BigInteger, nullable=False),
        sa.Column("passed_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("runs_folders")
