"""Per-project health threshold overrides.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "health_thresholds",
        sa.Column("project", sa.String(128), primary_key=True),
        sa.Column("overrides", sa.Text, nullable=False),
        sa.Column("updated_ts", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("health_thresholds")
