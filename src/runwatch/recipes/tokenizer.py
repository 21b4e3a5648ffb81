"""A byte-level tokenizer built in code: 256 byte ids plus a few special tokens.

It needs no files and no downloads, so tests and recipes can always build it, and
every string (any language, any symbol) round-trips exactly.
"""

from __future__ import annotations

from typing import Protocol

SPECIAL_TOKENS: tuple[str, ...] = ("<pad>", "<bos>", "<end>", "<system>", "<user>", "<assistant>")


class ChatTokenizer(Protocol):
    """What the chat template and recipes need from a tokenizer."""

    name: str
    vocab_size: int
    pad_id: int
    end_id: int

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...

    def role_ids(self, role: str) -> list[int]:
        """Token ids that open a turn of `role` (system, user or assistant)."""
        ...

    def end_ids(self) -> list[int]:
        """Token ids that close a turn; generation stops at the last of them."""
        ...


class ByteTokenizer:
    """Bytes 0-255 are ids 0-255; special tokens follow them."""

    name = "runwatch-bytes-v1"

    def __init__(self) -> None:
        self.special = {tok: 256 + i for i, tok in enumerate(SPECIAL_TOKENS)}
        self.vocab_size = 256 + len(SPECIAL_TOKENS)
        self.pad_id = self.special["<pad>"]
        self.bos_id = self.special["<bos>"]
        self.end_id = self.special["<end>"]

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: list[int]) -> str:
        # Special ids are dropped: decoded text is what the model wrote, not markup.
        data = bytes(i for i in ids if 0 <= i < 256)
        return data.decode("utf-8", errors="replace")

    def role_ids(self, role: str) -> list[int]:
        key = f"<{role}>"
        if key not in self.special:
            raise ValueError(f"unknown chat role {role!r}; use system, user or assistant")
        return [self.special[key]]

    def end_ids(self) -> list[int]:
        return [self.end_id]
