"""Baseline: the schema of store/schema.py at format v1.

A new database is built from schema.py and stamped here, so this revision has nothing
to do; later revisions change existing databases with op.* calls.

Revision ID: 0001
Revises:
"""

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
