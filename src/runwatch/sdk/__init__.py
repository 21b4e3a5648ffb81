"""The Python API a training loop records with: init, Run and NullRun."""

from runwatch.sdk.init import init
from runwatch.sdk.null import NullRun
from runwatch.sdk.run import Run, RunFinishedError

__all__ = ["NullRun", "Run", "RunFinishedError", "init"]
