"""The parts of W&B's API runwatch does not provide: `Api` (reading runs back) and
sweeps (`sweep`, `agent`). They exist, so a script that imports or names them loads;
using one raises `Error`, saying what to use in runwatch instead. W&B's internals
(`wandb.sdk`) raise ModuleNotFoundError when imported (runwatch.compat.wandb_modules).
"""

from __future__ import annotations

from typing import Any, NoReturn


class Error(RuntimeError):
    """A call the W&B shim cannot honour (W&B's `wandb.Error`)."""


API_INSTEAD = (
    "runwatch provides no wandb.Api(): read runs with the `runwatch runs` commands "
    "(`runwatch runs list`, `runwatch runs get RUN`, `runwatch runs metrics RUN -o json`, "
    "`runwatch runs rollouts RUN`) or with the HTTP API of `runwatch ui` (`GET /api/runs`, "
    "`GET /api/runs/{run}`, `GET /api/runs/{run}/history?key=…`; docs/api.md)")


SDK_INSTEAD = (
    "runwatch's W&B module (runwatch.compat.wandb) has none of W&B's internals (wandb.sdk), "
    "so transformers' WandbCallback (report_to=\"wandb\") cannot record through it: record "
    "a Hugging Face Trainer or TRL run with runwatch.compat.hf.RunwatchCallback instead, "
    "`Trainer(..., callbacks=[RunwatchCallback()])` with report_to=\"none\" "
    "(docs/huggingface.md)")


def _sweeps_instead(call: str) -> str:
    return (f"runwatch provides no sweeps, so {call} cannot run: start one run per "
            "configuration yourself (a loop that calls the training function with each, or "
            "`runwatch submit -- python train.py …` once per configuration), give the runs "
            "one `group=` in wandb.init(), and compare them in the web app (press the "
            "group's chip in the run list) or with `runwatch runs compare RUN BASELINE`")


class Api:
    """`wandb.Api`: building one raises `Error`, which names runwatch's ways to read runs."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise Error(API_INSTEAD)


def sweep(*args: Any, **kwargs: Any) -> NoReturn:
    """`wandb.sweep`: raises `Error`, which says how to run a sweep's arms instead."""
    raise Error(_sweeps_instead("wandb.sweep()"))


def agent(*args: Any, **kwargs: Any) -> NoReturn:
    """`wandb.agent`: raises `Error`, which says how to run a sweep's arms instead."""
    raise Error(_sweeps_instead("wandb.agent()"))
