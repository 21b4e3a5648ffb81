"""Dialect-aware statements the ingest hot path executes as raw executemany calls."""

from __future__ import annotations

from functools import cache

from sqlalchemy import Dialect, Table

from runwatch.store.dialect import conflict_insert


@cache
def insert_ignore_sql(table: Table, dialect_name: str, dialect: Dialect) -> str:
    """`INSERT … ON CONFLICT DO NOTHING` for `table`, positional in column order."""
    stmt = conflict_insert(dialect_name, table).on_conflict_do_nothing()
    compiled = stmt.compile(dialect=dialect, column_keys=[c.name for c in table.columns])
    sql = str(compiled)
    if dialect.paramstyle in ("named", "pyformat"):
        # Rewrite to positional markers so rows can be tuples (much cheaper than dicts).
        marker = "?" if dialect.paramstyle == "named" else "%s"
        for c in table.columns:
            sql = sql.replace(f":{c.name}", marker).replace(f"%({c.name})s", marker)
    return sql
