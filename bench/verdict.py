"""How a bench script ends: a wrong answer (a point lost, a record missing) fails it; a
timing target it misses is printed plainly and fails it only when strict (`--strict`, or
`bench/run_all.py --strict` for every script), since the same code misses a target on a
slower or busier machine."""

from __future__ import annotations

import argparse
import os

# run_all.py --strict sets it for the scripts it runs; a script's own --strict does the same
ENV_STRICT = "RUNWATCH_BENCH_STRICT"


def add_strict(ap: argparse.ArgumentParser) -> None:
    """The --strict option: exit 1 when a timing target is missed."""
    ap.add_argument("--strict", action="store_true", default=os.environ.get(ENV_STRICT) == "1",
                    help="exit 1 when a timing target is missed (without it a miss is printed "
                         "and the exit status is 0)")


def exit_status(missed: list[str], strict: bool, wrong: list[str] | None = None) -> int:
    """Print each missed target (`what: measured, target`) and each wrong answer; 1 for a
    wrong answer, or for a missed target when strict, else 0."""
    for what in missed:
        print(f"target missed: {what}" + ("" if strict else " (not a failure without --strict)"))
    for what in wrong or []:
        print(f"FAILED: {what}")
    return 1 if wrong or (strict and missed) else 0
