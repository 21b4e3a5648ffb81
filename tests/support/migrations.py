"""Taking an index back to an older schema revision, as the migration round-trip tests do
before `open_engine` brings it up again through the real Alembic path."""

from __future__ import annotations

from sqlalchemy import Engine

from runwatch.store.db import MIGRATIONS_DIR


def downgrade(engine: Engine, revision: str) -> None:
    """Run the migrations' downgrades on `engine` down to `revision`, in one transaction."""
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)
