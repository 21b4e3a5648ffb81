"""The index: SQLAlchemy Core schema, migrations and queries for SQLite and PostgreSQL."""

from runwatch.store.db import StoreError, open_engine

__all__ = ["StoreError", "open_engine"]
