"""Taking an index back to an older schema revision, as the migration round-trip tests do
before `open_engine` brings it up again through the real Alembic path."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, text

from runwatch.store import open_engine
from runwatch.store.db import HEAD_REVISION, MIGRATIONS_DIR


def downgrade(engine: Engine, revision: str) -> None:
    """Run the migrations' downgrades on `engine` down to `revision`, in one transaction."""
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)


@contextmanager
def reopened(db_url: str) -> Iterator[Engine]:
    """The index at `db_url` opened again as a newer runwatch opens it (`open_engine`, which
    upgrades it through the real Alembic path), checked to be at head; disposed after."""
    engine = open_engine(db_url)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() \
                == HEAD_REVISION
        yield engine
    finally:
        engine.dispose()
