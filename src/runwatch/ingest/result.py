"""What one ingest call stored, and what it refused (with file and line)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runwatch.store.points import PointColumns

# At most this many problems are itemised per file and batch; the rest are counted.
MAX_PROBLEMS_LISTED = 20


@dataclass
class IngestResult:
    """What one call stored, and what it refused (with file and line)."""

    rows: int = 0
    records: int = 0
    problems: list[str] = field(default_factory=list)
    problem_count: int = 0
    # metrics files: the new points by key, in seq order; the indexer's hooks (the
    # health engine, the server's series cache) take them from here
    points: dict[str, PointColumns] = field(default_factory=dict)

    def problem(self, message: str) -> None:
        self.problem_count += 1
        if len(self.problems) < MAX_PROBLEMS_LISTED:
            self.problems.append(message)

    def merge(self, other: IngestResult) -> None:
        self.rows += other.rows
        self.records += other.records
        self.problem_count += other.problem_count
        self.problems.extend(other.problems[: MAX_PROBLEMS_LISTED - len(self.problems)])
        for key, cols in other.points.items():
            mine = self.points.get(key)
            if mine is None:
                self.points[key] = cols
            else:
                mine.seqs.extend(cols.seqs)
                mine.steps.extend(cols.steps)
                mine.ts.extend(cols.ts)
                mine.values.extend(cols.values)


def where(file: str, rec: dict[str, Any]) -> str:
    """A record's place for a problem message: its line, else its seq."""
    line = rec.get("_line")
    return f"{file} line {line}" if line is not None else f"{file} seq {rec.get('seq')}"
