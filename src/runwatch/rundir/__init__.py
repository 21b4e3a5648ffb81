"""The run directory, format v1: the on-disk record of a run that every other part reads."""

from runwatch.rundir.format import (
    FILES,
    SCHEMA_VERSION,
    RunDirError,
    validate_name,
)

__all__ = ["FILES", "SCHEMA_VERSION", "RunDirError", "validate_name"]
