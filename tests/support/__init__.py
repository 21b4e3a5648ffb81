"""The test kit every test folder shares: deadline-bound waits, run-folder and manifest
builders, runs written by the SDK, the real CLI, and the tiny model the recipe tests train."""

from tests.support.cli import cli_here, run_cli
from tests.support.rundirs import MakeRun, manifest, sdk_run, write_manifest, write_run
from tests.support.tiny import SFT_CHECKPOINT, SORT_TASK, TINY_MODEL
from tests.support.wait import first_line, wait_for

__all__ = ["SFT_CHECKPOINT", "SORT_TASK", "TINY_MODEL", "MakeRun", "cli_here", "first_line",
           "manifest", "run_cli", "sdk_run", "wait_for", "write_manifest", "write_run"]
