"""The completions TRL's GRPOTrainer keeps with `log_completions=True`, as runwatch samples.

At each logging step the trainer writes the latest generation batch to
`<output_dir>/completions/completions_<step>.parquet` (its format, TRL's dataset card
says: `step`, `prompt`, `completion`, one column per reward function, `advantage`, and
any columns the reward functions added), after the callbacks' `on_log`. So the callback
reads the file of the current step at the events that follow (`take`); the reward
functions' names come from the metrics the trainer logs (`rewards/<name>/mean`).
"""

from __future__ import annotations

import hashlib
import io
import math
import os
import re
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from runwatch.sdk import NullRun, Run

# The metric TRL logs for each reward function (`eval_` first while evaluating).
_REWARD_MEAN = re.compile(r"^(?:eval_)?rewards/(.+)/mean$")
# Columns every file has; the others are reward functions' or their added columns.
_KNOWN = frozenset({"step", "prompt", "completion", "advantage"})


def file_of(output_dir: str | os.PathLike[str], step: int) -> str:
    """The file TRL writes a logging step's completions to."""
    return os.path.join(output_dir, "completions", f"completions_{step:05d}.parquet")


def _signature(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


class CompletionFiles:
    """Records the completion files one training writes as the run's samples of their step:
    `train`, or `val` for a file an evaluation wrote. A file that was there before the
    training began (an earlier training into the same output_dir) is not recorded."""

    def __init__(self, output_dir: str | os.PathLike[str], num_generations: int | None,
                 reward_weights: Sequence[float] | None) -> None:
        self._output_dir = output_dir
        self._group_size = num_generations
        self._weights = list(reward_weights) if reward_weights else None
        self._rewards: list[str] = []  # the reward functions' names, in TRL's order
        self._seen: dict[str, tuple[int, int, int]] = {}
        self._recorded: dict[str, bytes] = {}  # each recorded file's content digest
        self._warned = False
        folder = os.path.join(output_dir, "completions")
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    sig = _signature(entry.path)
                    if sig is not None:
                        self._seen[entry.path] = sig
        except OSError:
            pass  # no folder yet: nothing written before

    def note_metrics(self, logs: Mapping[str, Any]) -> None:
        """Learn the reward functions' names from the metrics the trainer logs."""
        for key in logs:
            m = _REWARD_MEAN.match(key)
            if m and m.group(1) not in self._rewards:
                self._rewards.append(m.group(1))

    def take(self, run: Run | NullRun, step: int, split: str = "train") -> None:
        """Record the file of `step` if the trainer wrote it since it was last looked at.
        A file that cannot be read is warned about once; training goes on."""
        path = file_of(self._output_dir, step)
        sig = _signature(path)
        if sig is None or self._seen.get(path) == sig:
            return
        self._seen[path] = sig
        try:
            with open(path, "rb") as f:
                content = f.read()
            digest = hashlib.sha256(content).digest()
            if self._recorded.get(path) == digest:
                return  # written again as it was (the trainer's closing log does that)
            samples = self.samples(_rows(content), split)
        except Exception as exc:  # a monitor must not stop the training
            if not self._warned:
                self._warned = True
                warnings.warn(f"runwatch: could not read TRL's completions {path} "
                              f"({type(exc).__name__}: {exc}); its samples are not recorded",
                              RuntimeWarning, stacklevel=2)
            return
        self._recorded[path] = digest
        if samples:
            run.log_samples(step, samples, split=split)

    def samples(self, rows: list[dict[str, Any]], split: str) -> list[dict[str, Any]]:
        """TRL's rows as runwatch samples: `reward` is the weighted sum of the reward
        functions' scores that TRL trains on (a function's None or NaN left out; None
        when none scored), `reward_terms` each function's weighted score; a train
        file's rows are whole groups in order, so each sample's `group` is its row over
        num_generations."""
        columns = list(rows[0]) if rows else []
        rewards = [c for c in columns if c in self._rewards and c not in _KNOWN]
        weights = self._weights if self._weights and len(self._weights) == len(rewards) \
            else [1.0] * len(rewards)
        grouped = (split == "train" and self._group_size
                   and len(rows) % self._group_size == 0)
        out = []
        for i, row in enumerate(rows):
            sample = {k: v for k, v in row.items() if k != "step" and k not in rewards}
            terms = {name: w * row[name] for name, w in zip(rewards, weights, strict=True)
                     if _score(row[name])}
            sample["reward"] = sum(terms.values()) if terms else None
            sample["reward_terms"] = terms
            if grouped and self._group_size:
                sample["group"] = i // self._group_size
            out.append(sample)
        return out


def _score(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) \
        and not math.isnan(value)


def _rows(content: bytes) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq  # TRL wrote the file with it (pandas' to_parquet)

    rows: list[dict[str, Any]] = pq.read_table(io.BytesIO(content)).to_pylist()
    return rows
