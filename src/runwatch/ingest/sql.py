"""Dialect-aware statements the ingest hot path executes as raw executemany calls."""

from __future__ import annotations

from functools import cache

from sqlalchemy import Dialect, Table
from sqlalchemy.dialects import postgresql, sqlite


@cache
def insert_ignore_sql(table: Table, dialect_name: str, dialect: Dialect) -> str:
    """`INSERT … ON CONFLICT DO NOTHING` for `table`, positional in column order."""
    mod = postgresql if dialect_name == "postgresql" else sqlite
    stmt = mod.insert(table).on_conflict_do_nothing()
    compiled = stmt.compile(dialect=dialect, column_keys=[c.name for c in table.columns])
    sql = str(compiled)
    if dialect.paramstyle in ("named", "pyformat"):
        # Rewrite to positional markers so rows can be tuples (much cheaper than dicts).
        marker = "?" if dialect.paramstyle == "named" else "%s"
        for c in table.columns:
            sql = sql.replace(f":{c.name}", marker).replace(f"%({c.name})s", marker)
    return sql
