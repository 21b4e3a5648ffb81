"""A minimal TensorBoard event-file writer for tests: TFRecord framing with masked CRC32C
and hand-encoded Event protobufs (scalars as simple_value or as a float tensor)."""

from __future__ import annotations

import struct
from pathlib import Path

from runwatch.ingest.importers.tensorboard import masked_crc


def varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(number: int, wire: int, payload: bytes | int) -> bytes:
    key = varint(number << 3 | wire)
    if wire == 0:
        assert isinstance(payload, int)
        return key + varint(payload)
    assert isinstance(payload, bytes)
    if wire == 2:
        return key + varint(len(payload)) + payload
    return key + payload


def scalar_value(tag: str, value: float, as_tensor: bool = False) -> bytes:
    body = field(1, 2, tag.encode())
    if as_tensor:
        # TF2 summaries: TensorProto{dtype: DT_FLOAT, tensor_shape: {}, float_val: [v]}
        tensor = field(1, 0, 1) + field(2, 2, b"") + field(5, 2, struct.pack("<f", value))
        body += field(8, 2, tensor)
    else:
        body += field(2, 5, struct.pack("<f", value))
    return body


def event(step: int, wall_time: float, scalars: dict[str, float], as_tensor: bool = False
          ) -> bytes:
    summary = b"".join(field(1, 2, scalar_value(t, v, as_tensor)) for t, v in scalars.items())
    return field(1, 1, struct.pack("<d", wall_time)) + field(2, 0, step) + field(5, 2, summary)


def file_version(wall_time: float) -> bytes:
    return field(1, 1, struct.pack("<d", wall_time)) + field(3, 2, b"brain.Event:2")


def frame(payload: bytes) -> bytes:
    header = struct.pack("<Q", len(payload))
    return (header + struct.pack("<I", masked_crc(header)) + payload
            + struct.pack("<I", masked_crc(payload)))


def write_events(path: Path, payloads: list[bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(frame(p) for p in payloads))
    return path
