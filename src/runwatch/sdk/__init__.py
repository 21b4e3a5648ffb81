"""The Python API a training loop records with: init, Run and NullRun; RefusedInput, the
exception a loop raises to refuse its input (its text becomes the run's reason), and
StopRequested, what SIGTERM raises in the loop while a run records."""

from runwatch.jobs.failures import RefusedInput
from runwatch.sdk.init import init
from runwatch.sdk.live import StopRequested
from runwatch.sdk.null import NullRun
from runwatch.sdk.run import Run, RunFinishedError

__all__ = ["NullRun", "RefusedInput", "Run", "RunFinishedError", "StopRequested", "init"]
