"""A whole file too big for one ingest request, sent in parts and stored whole.

Each part is a whole-file batch with `"part": {"index": i, "count": n, "sha256": h}`: its
content is the i-th piece of the file's bytes (the ingest route hands it on as a `Piece`),
and `h` the sha256 of all of them. The
server holds the pieces in memory (`Parts`, one per server process) until the last one
comes, then hands back the file, which is stored as if it had come in one request (one
transaction: the server shows the old file or the new one, never a part of it).

The sender sends the parts in order; one missing when the last comes (the server restarted
meanwhile, or let the pieces go: past PARTS_TTL_S, or to make room within
PARTS_HELD_BYTES) is refused with MISSING in the message, and the sender starts again from
part 0.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

MAX_PARTS = 4096
# What one process holds of unfinished files at most, and for how long after their last part.
PARTS_HELD_BYTES = 256 * 1024 * 1024
PARTS_TTL_S = 600.0
MISSING = "send the file again from part 0"
_SHA256 = re.compile(r"[0-9a-f]{64}")


class Piece(bytes):
    """A whole-file batch's content that is one piece of the file: its bytes, with the
    batch's `part` (runwatch.ingest.wholefiles.store_whole_file holds it until the last)."""

    part: Any

    def __new__(cls, raw: bytes, part: Any) -> Piece:
        piece = super().__new__(cls, raw)
        piece.part = part
        return piece


@dataclass
class _File:
    count: int
    pieces: dict[int, bytes] = field(default_factory=dict)
    at: float = 0.0
    refused: str | None = None  # why the file cannot be held (it is over its cap)

    @property
    def size(self) -> int:
        return sum(len(p) for p in self.pieces.values())


def check_part(part: Any) -> tuple[int, int, str]:
    """(index, count, sha256) of a batch's `part`, or ValueError saying what is wrong."""
    if not isinstance(part, dict):
        raise ValueError('part must be {"index": i, "count": n, "sha256": "<hex>"}')
    index, count, digest = part.get("index"), part.get("count"), part.get("sha256")
    if type(count) is not int or not 1 <= count <= MAX_PARTS:
        raise ValueError(f"part.count must be a whole number from 1 to {MAX_PARTS}")
    if type(index) is not int or not 0 <= index < count:
        raise ValueError("part.index must be a whole number from 0 to part.count - 1")
    if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
        raise ValueError("part.sha256 must be the whole file's sha256, 64 hex digits")
    return index, count, digest


class Parts:
    """The pieces of files sent in parts, by (run, file, sha256 of the whole)."""

    def __init__(self) -> None:
        self._files: dict[tuple[int, str, str], _File] = {}
        self._lock = threading.Lock()

    def take(self, run_pk: int, name: str, piece: bytes, part: Any, cap: int) -> bytes | None:
        """Hold one piece of `name`; the whole file once this was its last piece, else None.
        Raises ValueError for a bad `part`, a file over `cap` bytes, pieces missing when
        the last one comes, or pieces that do not make the file sent."""
        index, count, digest = check_part(part)
        now = time.monotonic()
        key = (run_pk, name, digest)
        with self._lock:
            for old in [k for k, f in self._files.items() if now - f.at > PARTS_TTL_S]:
                del self._files[old]
            held = self._files.setdefault(key, _File(count))
            held.at = now
            if held.refused is not None:
                raise ValueError(held.refused)
            if held.count != count:
                held.pieces.clear()
                held.count = count
            held.pieces[index] = piece
            if held.size > cap:
                # remembered, so the rest of its parts (or a group's replay) hear the same
                held.pieces.clear()
                held.refused = (f"{name} is more than the {cap} bytes the server keeps of "
                                "it: it cannot be sent")
                raise ValueError(held.refused)
            self._make_room(key)
            if index < count - 1:
                return None
            # kept until it expires: a group stored again batch by batch (another batch of
            # it was bad) takes the last piece a second time and must find the others
            pieces = dict(held.pieces)
        missing = [i for i in range(count) if i not in pieces]
        if missing:
            raise ValueError(f"{name}: part(s) {', '.join(map(str, missing[:5]))} of {count} "
                             f"are not here (the server restarted, or let them go); {MISSING}")
        whole = b"".join(pieces[i] for i in range(count))
        if hashlib.sha256(whole).hexdigest() != digest:
            raise ValueError(f"{name}: the {count} parts do not make the file whose sha256 was "
                             f"sent; {MISSING}")
        return whole

    def _make_room(self, keep: tuple[int, str, str]) -> None:
        """Let the oldest files go while more than PARTS_HELD_BYTES are held."""
        total = sum(f.size for f in self._files.values())
        for key in sorted(self._files, key=lambda k: self._files[k].at):
            if total <= PARTS_HELD_BYTES:
                return
            if key != keep:
                total -= self._files.pop(key).size


# one per server process: a file's parts all come to the process that listens
PARTS = Parts()
