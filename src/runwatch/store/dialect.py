"""The dialect's own INSERT (the one with ON CONFLICT), loading only the dialect in use:
importing `sqlalchemy.dialects.postgresql` costs every SQLite command its start-up."""

from __future__ import annotations

import importlib
from typing import Any

from sqlalchemy import Table


def conflict_insert(dialect_name: str, table: Table) -> Any:
    """`insert(table)` of PostgreSQL's or SQLite's dialect (they share `on_conflict_do_nothing`)."""
    name = "postgresql" if dialect_name == "postgresql" else "sqlite"
    return importlib.import_module(f"sqlalchemy.dialects.{name}").insert(table)
