"""Data preparation (the PREPARING phase): check rows, tokenize them, cache the result.

Rows are checked before anything is tokenized, so a bad row fails the run before
training with a reason that names it. Tokenized rows are cached under a key made of
the dataset's content, the tokenizer and the chat template: a second run with the same
inputs reads the cache, and a damaged cache is tokenized again.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runwatch.recipes.chat import (
    TEMPLATE_NAME,
    Message,
    RowRefusal,
    SetupError,
    render_conversation,
    render_prompt,
    render_response,
    validate_messages,
)
from runwatch.recipes.tokenizer import ChatTokenizer

Progress = Callable[[str, int | None, int | None], None]
"""progress(stage, done, total): reported as PREPARING events."""

Log = Callable[[str, str, dict[str, Any]], None]
"""log(level, message, data): reported as log records."""

Encoded = list[list[int]]
"""One tokenized row: SFT (ids, mask); DPO (prompt ids, chosen ids, rejected ids)."""


def read_jsonl(path: str | Path, setting: str = "data_path") -> list[Any]:
    """Rows of a JSONL file; a line that is not JSON is refused by its row number, and a
    file that cannot be read (missing, a folder, no permission) by its `setting`'s name:
    a typo in a path is the input's fault, and a retry would not mend it."""
    rows: list[Any] = []
    try:
        fh = open(path, encoding="utf-8")  # noqa: SIM115 - closed by the with below
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise SetupError(f"{setting} {path} cannot be read ({why}); give a JSONL file of "
                         "rows (one JSON object per line)") from None
    with fh:
        for line_no, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise RowRefusal(
                    len(rows) + 1,
                    f"(line {line_no} of {path}) is malformed: it is not valid JSON ({exc.msg})",
                    "write one JSON object per line",
                ) from exc
    return rows


def check_sft_row(index: int, row: Any) -> list[Message]:
    if not isinstance(row, dict) or "messages" not in row:
        raise RowRefusal(index, "is malformed: it has no 'messages' field",
                         "give each row a 'messages' list of {role, content} objects")
    return validate_messages(index, row["messages"])


@dataclass
class PreferenceRow:
    prompt: list[Message]
    chosen: str
    rejected: str


def check_dpo_row(index: int, row: Any) -> PreferenceRow:
    if not isinstance(row, dict) or not {"prompt", "chosen", "rejected"} <= set(row):
        raise RowRefusal(index, "is malformed: it lacks 'prompt', 'chosen' or 'rejected'",
                         "give each row a prompt (a list of messages) and both replies")
    for side in ("chosen", "rejected"):
        if not isinstance(row[side], str):
            raise RowRefusal(index, f"is malformed: '{side}' is not a string",
                             "give the chosen and rejected replies as text")
    prompt = validate_messages(index, row["prompt"], needs_reply=False)
    return PreferenceRow(prompt, row["chosen"], row["rejected"])


def encode_sft(tok: ChatTokenizer, messages: list[Message]) -> Encoded:
    ids, mask = render_conversation(tok, messages)
    return [ids, mask]


def encode_dpo(tok: ChatTokenizer, row: PreferenceRow) -> Encoded:
    return [render_prompt(tok, row.prompt), render_response(tok, row.chosen),
            render_response(tok, row.rejected)]


def cache_key(rows: list[Any], tokenizer_name: str, kind: str) -> str:
    digest = hashlib.sha256()
    for part in (kind, tokenizer_name, TEMPLATE_NAME):
        digest.update(part.encode() + b"\0")
    for row in rows:
        digest.update(json.dumps(row, sort_keys=True, ensure_ascii=False).encode() + b"\n")
    return digest.hexdigest()[:32]


def _read_cache(path: Path, key: str, n_rows: int) -> list[Encoded] | None:
    """The cached rows, or None when the file is missing or does not check out."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        rows = data["rows"]
        ok = data["key"] == key and len(rows) == n_rows and all(
            isinstance(r, list) and all(isinstance(s, list) for s in r) for r in rows
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return rows if ok else None


def tokenize_rows(
    rows: list[Any],
    encode: Callable[[Any], Encoded],
    key: str,
    cache_dir: Path | None,
    progress: Progress,
    log: Log,
) -> list[Encoded]:
    """Encode every (already checked) row, reading and filling the cache at `cache_dir`."""
    path = cache_dir / f"{key}.json" if cache_dir is not None else None
    if path is not None and path.exists():
        cached = _read_cache(path, key, len(rows))
        if cached is not None:
            log("info", f"used cached tokenized rows ({len(rows)} rows) from {path}",
                {"cache": str(path), "rows": len(rows), "cache_hit": True})
            return cached
        log("warning", f"the tokenized-row cache {path} is damaged; tokenizing again",
            {"cache": str(path), "cache_hit": False, "damaged": True})
    total = len(rows)
    every = max(1, total // 20)
    out: list[Encoded] = []
    progress("tokenizing", 0, total)
    for i, row in enumerate(rows, start=1):
        out.append(encode(row))
        if i % every == 0 or i == total:
            progress("tokenizing", i, total)
    if path is not None:
        progress("caching tokenized rows", None, None)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"key": key, "rows": out}), encoding="utf-8")
        os.replace(tmp, path)
        log("info", f"tokenized {total} rows and cached them in {path}",
            {"cache": str(path), "rows": total, "cache_hit": False})
    return out


def check_rows(rows: list[Any], check: Callable[[int, Any], Any], progress: Progress) -> list[Any]:
    """Check every row (1-based numbers in refusals) before anything else is done."""
    progress("validating rows", 0, len(rows))
    checked = [check(i, row) for i, row in enumerate(rows, start=1)]
    progress("validating rows", len(rows), len(rows))
    return checked


def cache_path(cache_dir: str | None) -> Path | None:
    return Path(cache_dir).expanduser() if cache_dir else None
