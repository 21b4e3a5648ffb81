"""runwatch: a self-hosted monitor for LLM post-training runs (SFT, DPO, GRPO)."""

from runwatch.sdk import NullRun, Run, RunFinishedError, init

__all__ = ["NullRun", "Run", "RunFinishedError", "init"]
__version__ = "0.1.0"
