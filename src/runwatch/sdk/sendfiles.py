"""The sender's whole files: config.yaml, engine_config.json, job.json and the samples files
(step_NNNN_<split>.json / val_NNNN_<split>.json, which the writer writes complete, by
renaming), each sent as one `{"file", "content"}` item when it is new or changed. Its stat
as sent (size, mtime, ctime, inode) and sha256 are kept in the sender's state file, so an
unchanged file costs a stat per pass, and any change to its stat has it read and sent when its
sha256 differs: a file restored over the old one with its mtime and size kept (`cp -p`,
`rsync -a`) gets a new ctime, one renamed over it a new inode. A stat taken within RACY_NS of
the file's last change is not trusted (a coarse file-system clock may show a rewrite of the
same size in the same tick): the file is read again on the next passes until it is older.
Those the server said it no longer holds, or holds another version of, or may hold an older
version of (`forget`: its database was restored from a backup), are sent again: the server
answers the sha256 it stored each file with, which is compared with the one kept here.

A file the server refuses as over its request limit (413) is sent again in parts of
PART_BYTES (smaller ones if a part is still too big), each with `"part": {"index", "count",
"sha256"}`; the server holds them and stores the file whole with the last one
(runwatch.ingest.parts). Parts the server lost meanwhile (it restarted) make it say so, and
the parts are sent again from the first.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import time
from collections.abc import Callable
from os import stat_result
from pathlib import Path
from stat import S_ISREG
from typing import Any

import orjson

from runwatch.rundir import format as fmt
from runwatch.rundir.safeio import CAPS, SAMPLES_CAP, read_capped
from runwatch.sdk.sendhttp import (
    Client,
    Held,
    Refused,
    Unreachable,
    UploadReport,
    check_answer,
    check_refusal,
    error_text,
)

# The sizes of the parts of a file over the server's request limit, tried in turn while a
# part is still refused as too big (its JSON may be larger than its bytes: escapes).
PART_BYTES = (2 * 1024 * 1024, 512 * 1024, 128 * 1024)
# What the server says when it no longer holds the earlier parts (runwatch.ingest.parts.MISSING).
PARTS_MISSING = "send the file again from part 0"
# A file changed less than this before its stat was taken may change again in the same tick of
# its file system's clock (1 or 2 s on some) with the same size: its stat is not trusted
# (git's "racy clean").
RACY_NS = 3 * 10**9
# The stat fields that tell a file changed; ctime moves on every write, rename and utime.
STAT_MARK = ("size", "mtime_ns", "ctime_ns", "ino")


class WholeFiles:
    """Sends a run folder's whole files to one server; `sent` is the state file's entry
    for them (name -> STAT_MARK, sha256, `racy` for a stat not trusted yet, `refused` for
    one the server refused, `after`: the highest seq stored from here of each record file,
    in fmt.FILES order, when it was sent, `stored_sha256` when the server stores another
    sha256 than the file's: one not UTF-8, sent with its bad bytes replaced), which `save`
    writes. `stored_seqs` gives those seqs now."""

    def __init__(self, run_dir: Path, client: Client, sent: dict[str, dict[str, Any]],
                 save: Callable[[], None], stored_seqs: Callable[[], list[int]]) -> None:
        self.run_dir = run_dir
        self.client = client
        self.sent = sent
        self.save = save
        self.stored_seqs = stored_seqs

    def names(self) -> list[str]:
        """config.yaml, engine_config.json, job.json and the samples files the folder holds
        now."""
        names = [fmt.CONFIG, fmt.ENGINE_CONFIG, fmt.JOB]
        with contextlib.suppress(OSError), os.scandir(self.run_dir) as entries:
            names += sorted(e.name for e in entries
                            if fmt.parse_sample_file_name(e.name) is not None)
        return names

    def send_changed(self, run_id: str, manifest: bytes, report: UploadReport,
                     stop: threading.Event | None) -> None:
        """Send each whole file that is new or changed since it was last sent; a file the
        server refuses as bad is reported once and sent again only once it changes."""
        for name in self.names():
            if stop is not None and stop.is_set():
                return
            path = self.run_dir / name
            now = time.time_ns()  # before the stat: a change after it is after `now`
            try:
                st = path.lstat()
            except OSError:
                continue
            seen = self.sent.get(name)
            mark = _mark(st, now)
            if not S_ISREG(st.st_mode) or (seen is not None and not seen.get("racy") and all(
                    seen.get(key) == mark[key] for key in STAT_MARK)):
                continue
            try:
                raw = read_capped(path, CAPS.get(name, SAMPLES_CAP))
            except OSError as exc:
                report.problems.append(f"{path} cannot be sent ({exc}); sent when it changes")
                mark.pop("racy", None)  # said once: tried again when its stat changes
                self.sent[name] = {**mark, "sha256": None}
                self.save()
                continue
            digest = hashlib.sha256(raw).hexdigest()
            if seen is None or seen.get("sha256") != digest:
                # taken before the send: records stored meanwhile may be stored after it
                mark["after"] = self.stored_seqs()
                if not self.send(run_id, manifest, name, raw, report):
                    mark["refused"] = True
                elif (stored := _stored_sha256(raw)) is not None:
                    mark["stored_sha256"] = stored
            else:
                mark.update((key, seen[key]) for key in ("after", "refused", "stored_sha256")
                            if key in seen)
            self.sent[name] = {**mark, "sha256": digest}
            self.save()

    def forget(self, held: Held) -> bool:
        """Forget having sent the files the server may not hold as sent, so that they are
        sent again: those it does not hold, those it holds with another sha256 than the one
        sent (its database is a backup from between two sends of the file) or with none (it
        stored them before it kept hashes: sent again once), and those sent after it stored
        records that it no longer holds (a server that keeps no hashes may hold an older
        version of them). Not those it refused, nor those that could not be read. Whether
        any was forgotten (the caller saves)."""
        tops = [-1 if (top := held.last_seq.get(name)) is None else top for name in fmt.FILES]
        lost = [name for name, seen in self.sent.items()
                if seen.get("sha256") is not None and not seen.get("refused")
                and (name not in held.whole_files or _sent_since(seen.get("after"), tops)
                     or _other_version(seen, held.whole_sha256, name))]
        for name in lost:
            del self.sent[name]
        return bool(lost)

    def send(self, run_id: str, manifest: bytes, name: str, raw: bytes,
             report: UploadReport) -> bool:
        """Have the server store one whole file, in parts when it is over the server's
        request limit; raises Unreachable or Refused when it did not and trying again can
        help, reports it when the file itself was refused (False)."""
        text = raw.decode("utf-8", errors="replace")
        result = self._post(run_id, manifest, name, text, None, report)
        if result is None:  # over the request limit
            return self._send_parts(run_id, manifest, name, text.encode(), report)
        if not self._stored(name, result, report):
            return False
        report.files += 1
        return True

    def _send_parts(self, run_id: str, manifest: bytes, name: str, data: bytes,
                    report: UploadReport) -> bool:
        digest = hashlib.sha256(data).hexdigest()
        for size in PART_BYTES:
            pieces = _pieces(data, size)
            for again in (False, True):
                for i, piece in enumerate(pieces):
                    part = {"index": i, "count": len(pieces), "sha256": digest}
                    result = self._post(run_id, manifest, name, piece.decode(), part, report)
                    if result is None:
                        break  # a part too big: smaller parts
                    if not result.get("ok") and not again and \
                            PARTS_MISSING in str(result.get("error")):
                        break  # the server lost the earlier parts: once more from the first
                    if not self._stored(name, result, report):
                        return False
                else:
                    report.files += 1
                    return True
                if result is None:
                    break
        report.problems.append(f"{self.run_dir / name} is too big for {self.client.server} "
                               f"even in parts of {PART_BYTES[-1]} bytes; not sent")
        return False

    def _post(self, run_id: str, manifest: bytes, name: str, text: str,
              part: dict[str, Any] | None, report: UploadReport) -> dict[str, Any] | None:
        """POST one whole-file item: its result, or None when the request was over the
        server's limit."""
        body = (b'{"batches":[{"run_id":' + orjson.dumps(run_id) + b',"manifest":' + manifest
                + b',"file":' + orjson.dumps(name)
                + (b',"part":' + orjson.dumps(part) if part is not None else b"")
                + b',"content":' + orjson.dumps(text) + b"}]}")
        status, answer = self.client.post(body)
        report.requests += 1
        report.body_bytes += len(body)
        results = answer.get("results") if isinstance(answer, dict) else None
        if status == 413 and not isinstance(results, list):
            return None
        check_answer(self.client, status, answer)
        if not isinstance(results, list) or len(results) != 1:
            raise Refused(f"{self.client.server} answered {status} with no result per batch; "
                          f"is it a runwatch server? ({error_text(answer)})")
        result: dict[str, Any] = results[0]
        return result

    def _stored(self, name: str, result: dict[str, Any], report: UploadReport) -> bool:
        """Whether the server stored the item; a refused file is reported (False), any
        other refusal raised."""
        if result.get("ok"):
            return True
        check_refusal(self.client, self.run_dir, result)
        if result.get("status") in (400, 413):
            report.problems.append(f"{self.run_dir / name}: the server refused it "
                                   f"({result.get('error')}); sent again when it changes")
            return False
        status = result.get("status")
        raise Unreachable(f"{self.client.server} did not store {name} "
                          f"({status}: {result.get('error')})",
                          status if isinstance(status, int) else None)


def _mark(st: stat_result, now: int) -> dict[str, Any]:
    """A file's STAT_MARK, with `racy` when it changed within RACY_NS before `now`."""
    mark: dict[str, Any] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns,
                            "ctime_ns": st.st_ctime_ns, "ino": st.st_ino}
    if max(st.st_mtime_ns, st.st_ctime_ns) > now - RACY_NS:
        mark["racy"] = True
    return mark


def _stored_sha256(raw: bytes) -> str | None:
    """The sha256 the server stores a file of bytes `raw` with, when it is not raw's own:
    a file not UTF-8 is sent as text with its bad bytes replaced."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return hashlib.sha256(raw.decode("utf-8", errors="replace").encode()).hexdigest()
    return None


def _other_version(seen: dict[str, Any], held_sha256: dict[str, str] | None,
                   name: str) -> bool:
    """Whether the server stores file `name` with another sha256 than it was sent with
    (none: stored before the server kept them); never for a server that does not say."""
    return held_sha256 is not None and \
        held_sha256.get(name) != seen.get("stored_sha256", seen.get("sha256"))


def _sent_since(after: object, tops: list[int]) -> bool:
    """Whether the server holds fewer records now (`tops`, fmt.FILES order) than it had
    stored from here when a file was sent (`after`): its database is from before that send."""
    return isinstance(after, list) and any(
        isinstance(seq, int) and seq > top for seq, top in zip(after, tops, strict=False))


def _pieces(data: bytes, size: int) -> list[bytes]:
    """`data` (UTF-8) in pieces of at most `size` bytes, each cut between characters."""
    out, start = [], 0
    while start < len(data):
        end = min(start + size, len(data))
        while end < len(data) and data[end] & 0xC0 == 0x80:  # inside a character
            end -= 1
        out.append(data[start:end])
        start = end
    return out or [b""]
