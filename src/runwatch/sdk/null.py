"""`NullRun`: the do-nothing stand-in that keeps training loops free of `if logging:`."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from types import TracebackType
from typing import Any

from runwatch.jobs.failures import exception_verdict


class NullRun:
    """Accepts every call a `Run` accepts and records nothing (disabled mode, non-zero ranks)."""

    id = ""
    name = ""
    dir: Path | None = None
    status: str | None = None
    dropped_values = 0
    keys_left_out = 0
    dropped_lines = 0
    finished = False

    def __init__(self) -> None:
        self.manifest: dict[str, Any] = {}

    def log(self, metrics: dict[str, Any], step: int | None = None) -> None:
        return None

    def log_samples(self, step: int, samples: list[dict[str, Any]], split: str = "train",
                    kind: str = "completions") -> None:
        return None

    def log_checkpoint(self, step: int, kind: str, id: str,
                       path: str | os.PathLike[str] | None = None, **meta: Any) -> None:
        return None

    def set_phase(self, phase: str, stage: str | None = None, done: int | None = None,
                  total: int | None = None, reason: str | None = None) -> None:
        return None

    def log_text(self, message: str, level: str = "info", data: Any = None) -> None:
        return None

    def logging_handler(self, level: int = logging.INFO) -> logging.Handler:
        return logging.NullHandler(level)

    def log_engine_config(self, requested: dict[str, Any], resolved: dict[str, Any]) -> None:
        return None

    def set_manifest_fields(self, **fields: Any) -> None:
        return None

    def finish(self, status: str | None = None, reason: str | None = None,
               code: str | None = None) -> None:
        self.status = status or "SUCCEEDED"

    def fail(self, reason: str, code: str | None = None) -> None:
        self.finish("FAILED", reason, code)

    def fail_from(self, exc: BaseException) -> None:
        self.finish(exception_verdict(exc).phase)

    def __enter__(self) -> NullRun:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        return None
