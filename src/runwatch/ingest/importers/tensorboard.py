"""Import the scalars of a TensorBoard event folder, with no TensorFlow dependency.

Event files are TFRecord streams: each record is a little-endian uint64 length, the
masked CRC32C of those 8 bytes, the payload, and the masked CRC32C of the payload. The
payload is a serialized `Event` protobuf; a small varint reader decodes the fields a
scalar needs: `wall_time` (1), `step` (2), `summary` (5) → `value` (1) → `tag` (1),
`simple_value` (2) or `tensor` (8) → `dtype` (1), `float_val` (5), `double_val` (6),
`tensor_content` (4).
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from runwatch.ingest.importers.common import Imported, SourceError, checked_step
from runwatch.ingest.points import RECORD_FIELDS

_POLY = 0x82F63B78  # CRC32C (Castagnoli), reflected


def _table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = tuple(_table())


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    table = _TABLE
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class EventFileError(SourceError):
    """An event file is damaged (bad CRC or a truncated record in the middle)."""


def records(path: Path) -> Iterator[bytes]:
    """The payloads of a TFRecord file; a torn last record (a crash mid-write) ends it."""
    data = path.read_bytes()
    pos, end = 0, len(data)
    while pos + 12 <= end:
        header = data[pos : pos + 8]
        (length,) = struct.unpack("<Q", header)
        (header_crc,) = struct.unpack("<I", data[pos + 8 : pos + 12])
        if masked_crc(header) != header_crc:
            raise EventFileError(f"{path}: record at byte {pos} has a bad length checksum")
        start = pos + 12
        if start + length + 4 > end:
            return  # torn tail
        payload = data[start : start + length]
        (payload_crc,) = struct.unpack("<I", data[start + length : start + length + 4])
        if masked_crc(payload) != payload_crc:
            raise EventFileError(f"{path}: record at byte {pos} has a bad data checksum")
        yield payload
        pos = start + length + 4


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def fields(buf: bytes) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) of a protobuf message; value is an int for
    varints, bytes for 64-bit, 32-bit and length-delimited fields."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
            yield number, wire, value
        elif wire == 1:
            yield number, wire, buf[pos : pos + 8]
            pos += 8
        elif wire == 2:
            length, pos = _varint(buf, pos)
            yield number, wire, buf[pos : pos + length]
            pos += length
        elif wire == 5:
            yield number, wire, buf[pos : pos + 4]
            pos += 4
        else:
            raise EventFileError(f"unsupported protobuf wire type {wire}")


DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64 = 1, 2, 3, 9


def _tensor_scalar(buf: bytes) -> float | None:
    """The single number of a scalar TensorProto, or None if it is not one."""
    dtype, values, content = 0, [], b""
    for number, wire, value in fields(buf):
        if number == 1 and wire == 0:
            dtype = value
        elif number == 4 and wire == 2:
            content = value
        elif number == 5:  # float_val: packed (wire 2) or not (wire 5)
            values += [v for (v,) in struct.iter_unpack("<f", value)]
        elif number == 6:
            values += [v for (v,) in struct.iter_unpack("<d", value)]
    if not values and content:
        code = {DT_FLOAT: "<f", DT_DOUBLE: "<d", DT_INT32: "<i", DT_INT64: "<q"}.get(dtype)
        if code and len(content) == struct.calcsize(code):
            values = [struct.unpack(code, content)[0]]
    return float(values[0]) if len(values) == 1 else None


def scalars(payload: bytes) -> tuple[int, float, list[tuple[str, float]]]:
    """(step, wall_time, [(tag, value)]) of one Event."""
    step, wall_time = 0, 0.0
    out: list[tuple[str, float]] = []
    for number, wire, value in fields(payload):
        if number == 1 and wire == 1:
            (wall_time,) = struct.unpack("<d", value)
        elif number == 2 and wire == 0:
            step = value - (1 << 64) if value >= 1 << 63 else value
        elif number == 5 and wire == 2:
            for vnum, vwire, vbuf in fields(value):
                if vnum != 1 or vwire != 2:
                    continue
                tag, scalar = None, None
                for f, w, v in fields(vbuf):
                    if f == 1 and w == 2:
                        tag = v.decode("utf-8", "replace")
                    elif f == 2 and w == 5:
                        (scalar,) = struct.unpack("<f", v)
                    elif f == 8 and w == 2:
                        scalar = _tensor_scalar(v)
                if tag is not None and scalar is not None:
                    out.append((tag, scalar))
    return step, wall_time, out


def event_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and "tfevents" in p.name)


def read(folder: Path) -> Imported:
    """All scalars of the event files under `folder` (or of one event file), one record
    per step; a tag written again at a step (a run restarted into the same folder) starts
    another record of that step, in file order, so the index shows the later value."""
    files = [folder] if folder.is_file() else event_files(folder)
    if not files:
        raise SourceError(f"{folder} holds no TensorBoard event files (events.out.tfevents.*)")
    by_step: dict[int, list[dict[str, Any]]] = {}
    # tags that name a record's own field (a loop's add_scalar("step", step)): an event's
    # step and wall time are the record's, so such a tag is left out, and the import says so
    own: Counter[str] = Counter()
    for path in files:
        for number, payload in enumerate(records(path)):
            step, wall_time, values = scalars(payload)
            if any(tag in RECORD_FIELDS for tag, _ in values):
                own.update(tag for tag, _ in values if tag in RECORD_FIELDS)
                values = [(tag, v) for tag, v in values if tag not in RECORD_FIELDS]
            if not values:
                continue
            checked_step(step, f"{path}: event {number}", "delete that event file from a copy "
                         "of the folder and import that")
            recs = by_step.setdefault(step, [{"step": step}])
            if recs[-1].keys() & {tag for tag, _ in values}:
                recs.append({"step": step})
            rec = recs[-1]
            rec["ts"] = max(rec.get("ts", 0.0), wall_time)
            rec.update(values)
    recs = [rec for s in sorted(by_step) for rec in by_step[s]]
    tags = {k for r in recs for k in r} - {"step", "ts"}
    method = "dpo" if any("rewards/chosen" in t for t in tags) else (
        "grpo" if any(t.endswith(("reward", "reward_std")) for t in tags) else "sft")
    notes = [f"tag {tag!r} ({n} points) is not imported: a record's own field has that name "
             "(each event's step and wall time are its record's)" for tag, n in own.items()]
    return Imported("tensorboard", method, recs, {}, str(folder), notes)
