"""One run folder's upload to a runwatch server's `POST /api/ingest`: what the SDK's
background sender (`runwatch.sdk.sender.Sender`) and `runwatch sync` (`sync_run`) share.

The run folder stays the record. A `RunUpload` only tails the files the writer already
writes (`runwatch.rundir.reader.read_new`, the indexer's reader). It

- reads what is new in each record file from the offsets it saved, complete lines only
  (a line still being written waits for the next pass);
- sends it in batches of at most BATCH_RECORDS records, gzip-compressed, every batch
  with the run's manifest (the server then knows the run whatever it lost); a line longer
  than READ_BYTES, which the reader reads alone (up to the format's longest line,
  `fmt.MAX_LINE_BYTES`, as the indexer does), goes in a request of its own, without the
  manifest, which a server takes past its body limit;
- moves its offsets on, in `<run>/.runwatch/sent.json` (written atomically, one entry
  per server), only once the server answered that it stored them, so a restart of
  either side resends at most the last request, which the server's idempotence on
  (run, file, seq) turns into nothing new;
- asks the server what it holds of the run when it starts and after the server did not
  answer (`GET /api/ingest?run=`), and sends again from there what it holds less of than
  the offsets say was sent: a server whose database was restored from a backup, or made
  anew at the same URL, gets back what it lost;
- splits a batch the server refuses as bad in halves until the one bad record is found,
  and skips (and reports) only that record, as it does a record a server refuses as too
  large (one from before requests of one record could be);
- sends the run's whole files (`runwatch.sdk.sendfiles`: config.yaml, engine_config.json,
  job.json, the samples files) after each request of records (or none), and again
  whenever one changes (its stat first, then its sha256); one over the server's request
  limit in parts.

Errors (`runwatch.sdk.sendhttp`) are sorted into `Unreachable` (no answer, 5xx, 429: try
again later, with exponential backoff), `Refused` (401/403, a manifest the server refuses,
a server that is not runwatch: trying again cannot help) and per-record refusals
(reported, skipped).
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from runwatch.rundir import format as fmt
from runwatch.rundir.atomic import write_atomic
from runwatch.rundir.jsonl import dumps_line, loads_line
from runwatch.rundir.reader import ReadResult, read_new
from runwatch.rundir.safeio import open_run_file, read_capped
from runwatch.sdk.sendfiles import WholeFiles
from runwatch.sdk.sendhttp import (
    Client,
    Held,
    NoRun,
    Refused,
    RunRefused,
    Unreachable,
    UploadReport,
    check_answer,
    check_refusal,
    error_text,
)

# The offsets, per server, inside the run folder, in fmt.STATE_DIR (a folder: the indexer
# reads no subfolder of a run).
STATE_FILE = "sent.json"
# At most this many records per batch and bytes read per file per request (the server
# takes 10,000 records per batch and 8 MiB per request); a longer line is read alone and
# sent alone (`_send_reads`).
BATCH_RECORDS = 5_000
READ_BYTES = 1024 * 1024
# Backoff between tries while the server cannot be reached: doubling, capped.
BACKOFF_MIN_S = 0.5
BACKOFF_MAX_S = 15.0
# The first bytes of each file sent from, kept with its offset to know it is the same file.
HEAD_BYTES = 64


# A batch: the file, its records as read, and the same records as the file's lines (sent
# as they are, not encoded again).
Batch = tuple[str, list[dict[str, Any]], list[bytes]]


class FolderHold:
    """The sender's leave to write its offsets into the run folder, which the SDK's
    sender loses when finish() stops waiting for it: the run's lock goes once it has let
    go, and a resumed run or a retry's next attempt may then hold the folder. No write
    starts after `let_go`; one under way then still ends, and says so."""

    def __init__(self) -> None:
        self._guard = threading.Condition()
        self._held = True
        self._busy = False
        self._then: Callable[[], None] | None = None

    @contextlib.contextmanager
    def writing(self) -> Iterator[bool]:
        """Whether the folder may be written, held so until the write is done (one
        thread writes)."""
        with self._guard:
            self._busy = held = self._held
        try:
            yield held
        finally:
            with self._guard:
                self._busy = False
                then, self._then = self._then, None
                self._guard.notify_all()
            if then is not None:
                then()

    def let_go(self, wait: float, then: Callable[[], None]) -> bool:
        """Write nothing more, and call `then` once no write is under way: before
        returning when none is or one ends within `wait` seconds (True), else as that one
        ends (on a stalled disk it may land much later)."""
        with self._guard:
            self._held = False
            done = self._guard.wait_for(lambda: not self._busy, wait)
            if not done:
                self._then = then
        if done:
            then()
        return done


class RunUpload:
    """Sends what is new in one run folder to one server, from the offsets saved there."""

    def __init__(self, run_dir: Path, client: Client, hold: FolderHold | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.client = client
        self._hold = hold or FolderHold()
        self._state_path = self.run_dir / fmt.STATE_DIR / STATE_FILE
        self._state = self._load_state()
        mine = self._state.setdefault("servers", {}).setdefault(client.server, {})
        self._files: dict[str, dict[str, Any]] = mine.setdefault("files", {})
        # per whole file: the size, mtime_ns and sha256 it was last sent (or refused) with
        self._whole = WholeFiles(self.run_dir, client, mine.setdefault("whole", {}),
                                 self._save_state, self._stored_seqs)
        self._manifest_sent: bytes | None = None
        # whether the server said what it holds of the run since it last did not answer
        self._asked = False
        self.run_id = ""

    # -- the offsets ------------------------------------------------------------------

    def _load_state(self) -> dict[str, Any]:
        try:
            state = loads_line(self._state_path.read_bytes())
        except (OSError, ValueError):
            return {"version": 1}
        return state if isinstance(state, dict) else {"version": 1}

    def _save_state(self) -> None:
        with self._hold.writing() as held:
            # when it cannot be written the offsets lag: what is sent again is stored once
            # never into a folder gone (moved or removed) since this pass read it: that
            # would make its path again, holding this state alone and no run
            if held and self.run_dir.is_dir():
                with contextlib.suppress(OSError):
                    write_atomic(self._state_path, orjson.dumps(self._state))

    def _position(self, name: str) -> tuple[int, int] | None:
        """(offset, line_no) to read `name` from: the start again when the file is a new one
        (a new attempt moved the old one away) or shorter than what was sent. None when
        there is no such file now: one the writer makes after this look is read from its
        start on the next pass (read now, it would have no position to keep)."""
        pos = self._files.get(name)
        try:
            st = (self.run_dir / name).stat()
        except FileNotFoundError:
            return None
        if (pos is None or pos.get("ino") != st.st_ino or st.st_size < pos.get("offset", 0)
                or _head(self.run_dir / name, len(pos.get("head", ""))) != pos.get("head", "")):
            # a file made anew may get the old one's inode: its first bytes tell them apart
            pos = self._files[name] = {"offset": 0, "line_no": 0, "ino": st.st_ino}
        return pos["offset"], pos["line_no"]

    def _stored_seqs(self) -> list[int]:
        """The highest seq stored from here of each record file, in fmt.FILES order (-1:
        none; an entry written before "seq" was kept counts its lines)."""
        return [pos.get("seq", pos.get("line_no", 0) - 1) if (pos := self._files.get(name))
                else -1 for name in fmt.FILES]

    # -- sending ----------------------------------------------------------------------

    def manifest(self) -> bytes:
        """The run's manifest as JSON bytes (raises Refused when it is missing or bad)."""
        path = self.run_dir / fmt.MANIFEST
        try:
            raw = read_capped(path)
            manifest = loads_line(raw)
        except FileNotFoundError:
            raise NoRun(f"{self.run_dir} is not a run folder: it has no {fmt.MANIFEST} "
                          "(runwatch.init writes one); pass a run folder or a folder of "
                          "runs") from None
        except (OSError, ValueError) as exc:
            raise RunRefused(f"{path} cannot be read as JSON ({exc}); nothing was sent"
                             ) from None
        if not isinstance(manifest, dict) or not isinstance(manifest.get("run_id"), str):
            raise RunRefused(f"{path} has no run_id; nothing was sent")
        self.run_id = manifest["run_id"]
        return dumps_line(manifest).rstrip(b"\n")

    def send_new(self, report: UploadReport | None = None,
                 stop: threading.Event | None = None) -> UploadReport:
        """Send everything complete that is new, a request at a time, until caught up.
        Raises Unreachable or Refused; what was stored before stays stored and counted.

        The first pass, and the first after the server did not answer (it may come back
        with its database restored from a backup), asks the server what it holds of the
        run, and goes on from there where it holds less than was sent (`_catch_up`).

        The events that end the run wait until the other files are sent to their end, so
        the server never shows a run ended before what it recorded before its end (the
        writer writes those first): the events are read first, and the end goes only in
        a pass whose reads of the other files, made after it was seen, found nothing new,
        after the whole files (its samples). Told to `stop` while the end waits (finish()
        gave up on the backlog), the end goes at once: a run shown ended with its last
        records to come (`runwatch sync`) is better than one shown running for ever."""
        report = report or UploadReport()
        try:
            return self._send_new(report, stop)
        except Unreachable:
            self._asked = False
            raise

    def _send_new(self, report: UploadReport, stop: threading.Event | None) -> UploadReport:
        ending = False  # the last pass left the run's end unsent
        while stop is None or not stop.is_set():
            manifest = self.manifest()
            if not self._asked:
                self._catch_up(manifest, report)
            reads: dict[str, tuple[ReadResult, str | None]] = {}
            ending = False
            for name in fmt.FILES:  # the events first
                got = self._read(name, _ends_run if name == fmt.EVENTS else None)
                if got is not None:
                    reads[name] = got
                    ending = ending or got[0].held
            reads = {name: got for name, got in reads.items() if got[1] is not None}
            if ending and not reads.keys() - {fmt.EVENTS}:
                # the other files, read after the end was seen, had nothing new: the run's
                # records before its end are sent; its samples files next, then the end
                self._whole.send_changed(self.run_id, manifest, report, stop)
                got = self._read(fmt.EVENTS, None)
                if got is not None:
                    reads[fmt.EVENTS] = got
                ending = False
            if not reads and manifest == self._manifest_sent:
                self._whole.send_changed(self.run_id, manifest, report, stop)
                return report
            self._send_reads(manifest, reads, report)
            # here too: a loop that logs faster than the server stores would never catch up
            self._whole.send_changed(self.run_id, manifest, report, stop)
        if ending:
            got = self._read(fmt.EVENTS, None)
            if got is not None:
                self._send_reads(self.manifest(), {fmt.EVENTS: got}, report)
        return report

    def _read(self, name: str, hold: Callable[[dict[str, Any]], bool] | None
              ) -> tuple[ReadResult, str | None] | None:
        """What is new in record file `name` (`read_new` with `hold`), with the file's
        first bytes to keep beside its new offset (None when nothing was read); None when
        the file is not there."""
        at = self._position(name)
        if at is None:
            return None
        offset, line_no = at
        res = read_new(self.run_dir / name, offset, line_no, READ_BYTES,
                       max_line=fmt.MAX_LINE_BYTES, keep_lines=True, hold=hold)
        if res.offset == offset:
            return res, None
        # taken now, with the read: after the request the file may be another
        head = self._files[name].get("head", "")
        if len(head) < 2 * HEAD_BYTES:
            head = _head(self.run_dir / name, 2 * min(HEAD_BYTES, res.offset))
        return res, head

    def _send_reads(self, manifest: bytes, reads: dict[str, tuple[ReadResult, str | None]],
                    report: UploadReport) -> None:
        """Send what was read of each file (the events first, as the writer wrote them),
        then move the offsets on. A line longer than READ_BYTES (read alone) goes after the
        others, alone in its request, which a server takes up to the format's longest
        line: without the manifest, so the manifest goes first when the server may not
        hold it as it is."""
        batches, alone = [], []
        for name in fmt.FILES:
            if name not in reads:
                continue
            res = reads[name][0]
            report.problems += [f"{self.run_dir / name} line {b.line_no}: {b.error}; "
                                "not sent" for b in res.bad]
            if len(res.lines) == 1 and len(res.lines[0]) > READ_BYTES:
                alone.append((name, res.records, res.lines))
                continue
            batches += [(name, res.records[i:i + BATCH_RECORDS],
                         res.lines[i:i + BATCH_RECORDS])
                        for i in range(0, len(res.records), BATCH_RECORDS)]
        stored: dict[str, int] = {}
        if batches or not alone or manifest != self._manifest_sent:
            self._deliver(manifest, batches, report, stored)
            self._manifest_sent = manifest
        for batch in alone:
            self._deliver(None, [batch], report, stored)
        for name, (res, head) in reads.items():
            if head is not None:
                pos = self._files[name]
                pos.update(offset=res.offset, line_no=res.line_no, head=head)
                if name in stored:
                    pos["seq"] = max(pos.get("seq", -1), stored[name])
        self._save_state()

    def _catch_up(self, manifest: bytes, report: UploadReport) -> None:
        """Ask the server what it holds of the run, and where it holds less than the
        offsets say was sent, go back to the first record it lacks (each record file) and
        send again the whole files it lacks, or may hold an older version of (sent after
        records it lacks: `WholeFiles.forget`). A server that holds the manifest as it is
        here is not sent it again, so a pass with nothing new costs this one request."""
        held = self.client.held(self.run_dir, self.run_id)
        report.requests += 1
        self._asked = True
        if held is None:  # a server that cannot say: the offsets stand
            return
        # before _rewind: it lowers the seqs stored from here to the server's
        forgot = self._whole.forget(held)
        moved = [self._rewind(name, held) for name in fmt.FILES]
        if forgot or any(moved):
            self._save_state()
        # a server that lost the run (or holds another manifest) is sent it again before
        # a record that goes without it
        same = held.manifest is not None and held.manifest == loads_line(manifest)
        self._manifest_sent = manifest if same else None

    def _rewind(self, name: str, held: Held) -> bool:
        """Go back in record file `name` to its first record above the highest seq the
        server holds of it, when that is below the highest it stored from here (whether
        it changed the offsets)."""
        pos = self._files.get(name)
        if pos is None or not pos.get("offset") or self._position(name) is None:
            return False
        pos = self._files[name]  # a new file is read from its start anyway
        top = held.last_seq.get(name)
        top = -1 if top is None else top
        # an entry written before "seq" was kept: the file's seq counts its lines
        if top >= pos.get("seq", pos.get("line_no", 0) - 1):
            return False
        offset, line_no = _after_seq(self.run_dir / name, top, pos["offset"])
        pos.update(offset=offset, line_no=line_no, seq=top)
        return True

    def _deliver(self, manifest: bytes | None, batches: list[Batch], report: UploadReport,
                 stored: dict[str, int]) -> None:
        """Have the server store `batches` (the manifest alone when there are none; each
        batch with it unless it is None); a batch refused as bad is split until its bad
        records are found and skipped, as is a record refused as too large. `stored` gets,
        per file, the highest seq the server said it stored."""
        body = _body(self.run_id, manifest, batches or [(fmt.EVENTS, [], [])])
        status, answer = self.client.post(body)
        report.requests += 1
        report.body_bytes += len(body)
        if status == 413 and len(batches) == 1 and len(batches[0][1]) == 1 and not (
                isinstance(answer, dict) and isinstance(answer.get("results"), list)):
            # one record over the request limit of a server from before one record could
            # be as long as a line of its file: it will not take it later either
            self._skip(report, batches[0], error_text(answer))
            return
        check_answer(self.client, status, answer)
        results = answer.get("results") if isinstance(answer, dict) else None
        if not isinstance(results, list) or len(results) != max(len(batches), 1):
            raise Refused(f"{self.client.server} answered {status} with no result per batch; "
                          "is it a runwatch server?")
        if not batches:
            if not results[0].get("ok"):
                check_refusal(self.client, self.run_dir, results[0])  # its token, its folder
                raise RunRefused(f"{self.client.server} refused the manifest of "
                                 f"{self.run_dir}: {results[0].get('error')}")
            return
        for (name, records, raw), result in zip(batches, results, strict=True):
            if result.get("ok"):
                report.records[name] = report.records.get(name, 0) + len(records)
                stored[name] = max(stored.get(name, -1), *(r["seq"] for r in records))
                continue
            check_refusal(self.client, self.run_dir, result)
            if result.get("status") in (400, 413) and len(records) > 1:
                half = len(records) // 2
                self._deliver(manifest, [(name, records[:half], raw[:half]),
                                         (name, records[half:], raw[half:])], report, stored)
            elif result.get("status") in (400, 413):
                self._skip(report, (name, records, raw), result.get("error"))
            else:
                status = result.get("status")
                raise Unreachable(f"{self.client.server} did not store a batch "
                                  f"({status}: {result.get('error')})",
                                  status if isinstance(status, int) else None)

    def _skip(self, report: UploadReport, batch: Batch, error: object) -> None:
        """Count and say the one record of `batch`, which the server refused."""
        name, records, _ = batch
        report.skipped += 1
        report.problems.append(f"{self.run_dir / name} line {records[0].get('_line')}: the "
                               f"server refused it ({error}); skipped")


def _ends_run(record: dict[str, Any]) -> bool:
    """Whether an events record ends the run (a terminal phase)."""
    return record.get("phase") in fmt.TERMINAL_PHASES


def _after_seq(path: Path, seq: int, upto: int) -> tuple[int, int]:
    """(offset, line_no) of the first record of `path` whose seq is above `seq` (a file's
    seqs rise line by line), looked for before byte `upto`, a line's end; `upto` and its
    line when every record before it is at or below `seq`."""
    offset = line_no = 0
    while offset < upto:
        res = read_new(path, offset, line_no, min(READ_BYTES, upto - offset),
                       max_line=fmt.MAX_LINE_BYTES,
                       hold=lambda record: record["seq"] > seq)
        moved = res.offset != offset  # else the file changed under the read
        offset, line_no = res.offset, res.line_no
        if res.held or not moved:
            break
    return offset, line_no


def _head(path: Path, hex_chars: int) -> str:
    """The first `hex_chars` / 2 bytes of a record file, in hex ('' when it is gone)."""
    if not hex_chars:
        return ""
    try:
        with open_run_file(path) as f:
            return f.read(hex_chars // 2).hex()
    except OSError:
        return ""


def _body(run_id: str, manifest: bytes | None, batches: list[Batch]) -> bytes:
    """The request's JSON: each batch's lines as the file holds them (with the manifest
    unless it is None)."""
    head = b'{"run_id":' + orjson.dumps(run_id)
    if manifest is not None:
        head += b',"manifest":' + manifest
    parts = [head + b',"file":' + orjson.dumps(name) + b',"records":[' + b",".join(lines)
             + b"]}" for name, _, lines in batches]
    return b'{"batches":[' + b",".join(parts) + b"]}"


def backoff(failures: int) -> float:
    """Seconds to wait after `failures` failed tries in a row: doubling, capped, jittered."""
    top = min(BACKOFF_MAX_S, BACKOFF_MIN_S * 2 ** min(failures - 1, 16))
    return top * (0.5 + random.random() / 2)


def sync_run(run_dir: Path, client: Client, retry_for: float = 30.0) -> UploadReport:
    """Send what is new in one run folder (`runwatch sync`), trying again with backoff
    while the server cannot be reached for up to `retry_for` seconds."""
    upload = RunUpload(run_dir, client)
    upload.manifest()  # a folder that is no run fails here, before any request
    report = UploadReport()
    end = time.monotonic() + retry_for
    failures = 0
    while True:
        try:
            return upload.send_new(report)
        except Unreachable:
            failures += 1
            pause = backoff(failures)
            if time.monotonic() + pause > end:
                raise
            time.sleep(pause)
