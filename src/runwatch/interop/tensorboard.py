"""A run of the index as TensorBoard event files: every metric key as a scalar curve, the
mean of each reward term over a step's rollouts, the config for the HParams dashboard and
a step's rollouts as text, written with tensorboardX's SummaryWriter.

An `Export` writes what is new each time `sync` is called, so one export can follow a run
while it trains. TensorBoard keeps scalars as 32-bit floats: a value reads back as
`numpy.float32(value)`, its step and the time it was logged as they were.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Row

from runwatch.store.keys import run_keys
from runwatch.store.reward_terms import term_means
from runwatch.store.rollouts import rollouts
from runwatch.store.series import keep_mask, read_rows

# Put in an export's folder, so a later export of the same run knows the event files
# there are its own to replace (and never deletes anyone else's).
MARKER = ".runwatch-tensorboard"
EVENT_PREFIX = "events.out.tfevents."
# Rollouts shown as text for each kept step, in scoring order (`runs rollouts` has all).
TEXT_ROLLOUTS = 8
# Events the writer's thread may hold unwritten: its default (10) makes each point wait
# for the thread, several times slower on a long run.
WRITE_QUEUE = 1000
# What tensorboardX's `x2num.check_nan` warns, once per point, of any NaN or infinity: an
# export writes the run's NaN and ±Infinity on purpose (they are its values), so it is
# dropped for the points an export writes (`ExpectedNonFinite`).
NONFINITE_LOGGER = "tensorboardX.x2num"
NONFINITE_WARNING = "NaN or Inf found in input tensor."
# The HParams plugin's session status for each terminal phase.
END_STATUS = {"SUCCEEDED": "STATUS_SUCCESS", "FAILED": "STATUS_FAILURE",
              "CANCELLED": "STATUS_ABORTED"}


# What a TensorBoard tag may hold; anything else becomes "_" (tensorboardX's own rule).
_NOT_IN_TAG = re.compile(r"[^-/\w.]")


class ExportError(Exception):
    """The export cannot be written where it was asked to go."""


def tag_of(key: str) -> str:
    """The TensorBoard tag of a metric key: characters a tag cannot hold become "_" and
    leading slashes go (`eval loss` → `eval_loss`)."""
    return _NOT_IN_TAG.sub("_", key).lstrip("/")


def term_tag(split: str, term: str) -> str:
    """The scalar tag of a reward term's mean over a step's rollouts."""
    return tag_of(f"rollouts/{split}/reward_terms/{term}")


def text_tag(split: str) -> str:
    """The text tag of a step's rollouts (tensorboardX adds `/text_summary`)."""
    return tag_of(f"rollouts/{split}")


def prepare_dir(out: Path) -> None:
    """Make `out` ready for a fresh export: create it, or clear the event files a previous
    export of runwatch left there; refuse a file, or a folder of someone else's events."""
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out} is a file, not a folder for TensorBoard's event files")
    old = sorted(out.glob(EVENT_PREFIX + "*")) if out.is_dir() else []
    if old and not (out / MARKER).exists():
        raise ExportError(f"{out} already holds TensorBoard event files that runwatch did not "
                          "write; pass --out with an empty or new folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
        for f in old:
            f.unlink()
        (out / MARKER).write_text("event files written by `runwatch runs tensorboard`; the "
                                  "next export of the run replaces them\n")
    except OSError as exc:
        raise ExportError(f"cannot write the export to {out}: {exc.strerror or exc}") from exc


def hparam_values(flat: Mapping[str, Any]) -> dict[str, bool | str | float]:
    """A flattened config as HParams values: numbers, booleans and strings as they are,
    lists and other values as JSON text; unset (None) settings left out."""
    out: dict[str, bool | str | float] = {}
    for k, v in flat.items():
        if v is None:
            continue
        if isinstance(v, bool | str | int | float):
            out[k] = v
        else:
            out[k] = json.dumps(v, sort_keys=True, default=str)
    return out


def rollouts_markdown(samples: list[dict[str, Any]], total: int) -> str:
    """A step's rollouts as Markdown: each one's reward and terms, prompt and completion."""
    parts = [f"{len(samples)} of {total} rollouts, in scoring order"]
    for s in samples:
        terms = ", ".join(f"{k} {v}" for k, v in s["reward_terms"].items())
        head = f"### rollout {s['index']}: reward {s['reward']}"
        parts += [head + (f" ({terms})" if terms else ""),
                  "**prompt**", _fenced(_as_text(s["prompt"])),
                  "**completion**", _fenced(_as_text(s["completion"]))]
    return "\n\n".join(parts)


def _as_text(value: Any) -> str:
    """A prompt or completion as text: chat messages one per line as `role: content`."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(m, dict) and "content" in m for m in value):
        return "\n".join(f"{m.get('role', '?')}: {_as_text(m['content'])}" for m in value)
    return json.dumps(value, ensure_ascii=False, indent=1, default=str)


def _fenced(text: str) -> str:
    """`text` in a code block whose fence is longer than any run of backticks in it."""
    longest, run = 0, 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


def _summary_writer() -> Any:
    """tensorboardX's SummaryWriter, imported without torch where torch is not loaded yet.

    tensorboardX imports torch when it loads, only to accept torch tensors, which an export
    never passes: that import was 10 of the 10.5 s an export of a few steps took. With
    `sys.modules["torch"]` None, `import torch` raises ImportError, which tensorboardX takes
    as "no torch". A process that has torch already gets it as it is."""
    if "tensorboardX.writer" in sys.modules or "torch" in sys.modules:
        from tensorboardX import SummaryWriter
        return SummaryWriter
    sys.modules["torch"] = None  # type: ignore[assignment]
    try:
        from tensorboardX import SummaryWriter
    finally:
        if sys.modules.get("torch", 0) is None:
            del sys.modules["torch"]
    return SummaryWriter


class ExpectedNonFinite(logging.Filter):
    """Drops tensorboardX's warning of a NaN or infinite value in the thread that made the
    filter (the export's): its other messages, and that one from other threads (another
    user of tensorboardX in the process), pass."""

    def __init__(self) -> None:
        super().__init__()
        self.thread = threading.get_ident()

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.thread == self.thread and record.msg == NONFINITE_WARNING)


class Export:
    """Event files for one run in `out`, brought up to date by each `sync`; make, sync and
    close it in one thread (tensorboardX's warning of each non-finite point it writes is
    dropped in that thread until `close`)."""

    def __init__(self, out: Path, text_rollouts: int = TEXT_ROLLOUTS) -> None:
        SummaryWriter = _summary_writer()
        prepare_dir(out)
        self.text_rollouts = text_rollouts
        self.writer = SummaryWriter(logdir=str(out), flush_secs=5, max_queue=WRITE_QUEUE)
        self.max_seq: dict[int, int] = {}  # key id -> the newest point written
        self.rollout_steps: set[tuple[int, str]] = set()
        self.points = 0
        # when each step was logged, so a step's reward-term means share its wall time
        self.step_time: dict[int, float] = {}
        self.tags: set[str] = set()
        # metric key (or reward term) -> its tag, unique in the export
        self.key_tags: dict[str, str] = {}
        self.quiet = ExpectedNonFinite()  # last: `close` removes it
        logging.getLogger(NONFINITE_LOGGER).addFilter(self.quiet)

    def write_hparams(self, flat_config: Mapping[str, Any], metric_tags: list[str]) -> None:
        """The config as one HParams session (this folder), with `metric_tags` listed as
        its metrics."""
        from tensorboardX.summary import hparams

        exp, start, _ = hparams(hparam_values(flat_config), dict.fromkeys(metric_tags, 0.0))
        fw = self.writer._get_file_writer()
        fw.add_summary(exp)
        fw.add_summary(start)

    def sync(self, conn: Connection, run: Row[Any]) -> int:
        """Write the points and rollouts stored since the last sync; the points written."""
        before = self.points
        # a key that is a tag as it is keeps it; a key renamed to it gets a suffix
        keys = sorted(run_keys(conn, run.pk), key=lambda k: (tag_of(k.key) != k.key, k.key))
        for key in keys:
            rows = read_rows(conn, key.id, self.max_seq.get(key.id, -1))
            if rows.size == 0:
                continue
            self.max_seq[key.id] = int(rows["seq"][-1])
            rows = rows[keep_mask(rows["step"])]
            tag = self._tag(key.key, tag_of(key.key))
            for step, ts, value in zip(rows["step"].tolist(), rows["ts"].tolist(),
                                       rows["value"].tolist(), strict=True):
                self.writer.add_scalar(tag, value, step, walltime=ts)
                self.step_time[step] = ts
            self.points += int(rows.size)
        self._rollouts(conn, run)
        self.writer.flush()
        return self.points - before

    def _tag(self, key: str, base: str) -> str:
        """The tag of `key`: `base`, or `base_2`, `base_3`, … where another key took it."""
        if key not in self.key_tags:
            tag, n = base, 1
            while tag in self.tags:
                n += 1
                tag = f"{base}_{n}"
            self.key_tags[key] = tag
            self.tags.add(tag)
        return self.key_tags[key]

    def _rollouts(self, conn: Connection, run: Row[Any]) -> None:
        available = rollouts(conn, run.pk, limit=0)["available"]
        for a in sorted(available, key=lambda a: (a["step"], a["split"])):
            step, split = int(a["step"]), str(a["split"])
            if (step, split) in self.rollout_steps:
                continue
            self.rollout_steps.add((step, split))
            kept = rollouts(conn, run.pk, step=step, split=split, limit=a["count"])
            samples = kept["samples"]
            for term, mean in term_means(s["reward_terms"] for s in samples).items():
                # keyed apart from the metric keys, one of which may be named like it
                tag = self._tag(f"\0{split}\0{term}", term_tag(split, term))
                self.writer.add_scalar(tag, mean, step, walltime=self.step_time.get(step))
            shown = samples[: self.text_rollouts]
            self.writer.add_text(text_tag(split), rollouts_markdown(shown, len(samples)), step,
                                 walltime=self.step_time.get(step))

    def end(self, status: str) -> None:
        """Mark the HParams session ended with the run's terminal phase (written at once,
        for a TensorBoard already reading the files)."""
        from tensorboardX.proto.api_pb2 import Status
        from tensorboardX.proto.plugin_hparams_pb2 import HParamsPluginData, SessionEndInfo
        from tensorboardX.proto.summary_pb2 import Summary, SummaryMetadata

        info = SessionEndInfo(status=Status.Value(END_STATUS.get(status, "STATUS_UNKNOWN")),
                              end_time_secs=time.time())
        content = HParamsPluginData(session_end_info=info, version=0).SerializeToString()
        meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="hparams",
                                                                      content=content))
        summary = Summary(value=[Summary.Value(tag="_hparams_/session_end_info",
                                               metadata=meta)])
        self.writer._get_file_writer().add_summary(summary)
        self.writer.flush()

    def close(self) -> None:
        try:
            self.writer.close()
        finally:
            logging.getLogger(NONFINITE_LOGGER).removeFilter(self.quiet)

