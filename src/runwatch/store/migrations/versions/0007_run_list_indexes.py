"""Indexes for the run list of a team server: one project's, one phase's or one group's
runs, newest first, without walking every run (ix_runs_created alone made a project of
few runs among 10,000 read all 10,000).

Revision ID: 0007
Revises: 0006
"""

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

INDEXES = {
    "ix_runs_project_created": ["project", "created_at"],
    "ix_runs_status_created": ["status", "created_at"],
    "ix_runs_group_created": ["group_name", "created_at"],
}


def upgrade() -> None:
    for name, columns in INDEXES.items():
        op.create_index(name, "runs", columns)


def downgrade() -> None:
    for name in INDEXES:
        op.drop_index(name, "runs")
