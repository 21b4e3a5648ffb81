"""Projects and API tokens (projects, api_tokens).

An index made before them has no tokens: a server of it accepts only its own --token,
as before, until tokens are made with `runwatch tokens create`.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "projects",
        sa.Column("name", sa.String(128), primary_key=True),
        sa.Column("created_by", sa.String(128), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("secret_sha256", sa.String(64), nullable=False, unique=True),
        sa.Column("hint", sa.String(16), nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("project", sa.String(128), nullable=False),
        sa.Column("right", sa.String(8), nullable=False),
        sa.Column("created_by", sa.String(128), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("last_used_at", sa.Float),
        sa.Column("revoked_at", sa.Float),
    )
    op.create_index("ix_api_tokens_project", "api_tokens", ["project"])


def downgrade() -> None:
    op.drop_index("ix_api_tokens_project", "api_tokens")
    op.drop_table("api_tokens")
    op.drop_table("projects")
