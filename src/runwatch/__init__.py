"""runwatch: a self-hosted monitor for LLM post-training runs (SFT, DPO, GRPO)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["NullRun", "Run", "RunFinishedError", "init"]
__version__ = "0.1.0"

if TYPE_CHECKING:
    from runwatch.sdk import NullRun, Run, RunFinishedError, init


def __getattr__(name: str) -> Any:
    # The SDK loads on first use, so the `runwatch` commands that only read the index
    # start without it (it is a fifth of their start-up).
    if name in __all__:
        from runwatch import sdk

        return getattr(sdk, name)
    raise AttributeError(f"module 'runwatch' has no attribute {name!r}")
