"""The run directory, format v1: the on-disk record of a run that every other part reads."""

from runwatch.rundir.atomic import write_atomic
from runwatch.rundir.format import (
    FILES,
    SCHEMA_VERSION,
    RunDirError,
    validate_name,
)
from runwatch.rundir.manifest import build_manifest

__all__ = ["FILES", "SCHEMA_VERSION", "RunDirError", "build_manifest", "validate_name",
           "write_atomic"]
