"""The index: SQLAlchemy Core schema, migrations and queries for SQLite and PostgreSQL.

`open_engine` and `StoreError` load SQLAlchemy on first use, so a module of this package
that does not need it (store/plain.py) is imported without it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runwatch.store.db import StoreError, open_engine

__all__ = ["StoreError", "open_engine"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from runwatch.store import db

        return getattr(db, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
