"""Fitting tokenized rows to max_seq_length (the data-fit report) and making batches.

The batch for step s depends only on the seed and s, so a resumed run trains the same
rows at every step as an uninterrupted one, and two runs with one config compare
like for like.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from runwatch.recipes.config import ConfigError
from runwatch.recipes.data import Encoded


@dataclass
class DataFit:
    """How the rows fit max_seq_length, and how much of the batches was padding."""

    rows: int = 0
    rows_at_max_length: int = 0
    rows_lost_target_end: int = 0
    rows_dropped_empty: int = 0
    batch_tokens: int = 0
    padding_tokens: int = 0

    @property
    def padding_fraction(self) -> float:
        return self.padding_tokens / self.batch_tokens if self.batch_tokens else 0.0

    def add_batch(self, tokens: int, padding: int) -> None:
        self.batch_tokens += tokens
        self.padding_tokens += padding

    def as_dict(self) -> dict[str, float | int]:
        return {
            "rows": self.rows,
            "rows_at_max_length": self.rows_at_max_length,
            "rows_lost_target_end": self.rows_lost_target_end,
            "rows_dropped_empty": self.rows_dropped_empty,
            "padding_fraction": self.padding_fraction,
        }


@dataclass
class SFTExample:
    ids: list[int]
    mask: list[int]


def fit_sft(rows: list[Encoded], max_len: int) -> tuple[list[SFTExample], DataFit]:
    """Cut rows to `max_len`; drop those left with no trained token."""
    fit = DataFit(rows=len(rows))
    kept: list[SFTExample] = []
    for ids, mask in rows:
        if len(ids) >= max_len:
            fit.rows_at_max_length += 1
        if len(ids) > max_len and any(mask[max_len:]):
            fit.rows_lost_target_end += 1
        ids, mask = ids[:max_len], mask[:max_len]
        # Position 0 is never a target (nothing precedes it), so it cannot count.
        if not any(mask[1:]):
            fit.rows_dropped_empty += 1
            continue
        kept.append(SFTExample(ids, mask))
    return kept, fit


@dataclass
class PairExample:
    prompt: list[int]
    chosen: list[int]
    rejected: list[int]


def fit_pairs(rows: list[Encoded], max_len: int) -> tuple[list[PairExample], DataFit]:
    """Cut each reply so prompt + reply fits `max_len`; drop pairs with an empty side."""
    fit = DataFit(rows=len(rows))
    kept: list[PairExample] = []
    for prompt, chosen, rejected in rows:
        longest = len(prompt) + max(len(chosen), len(rejected))
        if longest >= max_len:
            fit.rows_at_max_length += 1
        if longest > max_len:
            fit.rows_lost_target_end += 1
        room = max_len - len(prompt)
        if room <= 0:
            fit.rows_dropped_empty += 1
            continue
        kept.append(PairExample(prompt, chosen[:room], rejected[:room]))
    return kept, fit


class BatchOrder:
    """Indices of the rows for each step: a fresh seeded shuffle every epoch."""

    def __init__(self, n_rows: int, batch_size: int, seed: int) -> None:
        if n_rows == 0:
            raise ConfigError("no rows are left to train on: there were none, or "
                              "max_seq_length cut every one to nothing (the data-fit report "
                              "says which); give rows, or raise max_seq_length")
        self.n_rows = n_rows
        self.batch_size = batch_size
        self.seed = seed
        self._perms: dict[int, list[int]] = {}

    def _perm(self, epoch: int) -> list[int]:
        if epoch not in self._perms:
            order = list(range(self.n_rows))
            random.Random(self.seed * 1_000_003 + epoch).shuffle(order)
            self._perms = {epoch: order}
        return self._perms[epoch]

    def indices(self, step: int) -> list[int]:
        """Rows for `step` (1-based): consecutive slices of the epoch shuffles."""
        start = (step - 1) * self.batch_size
        out = []
        for pos in range(start, start + self.batch_size):
            epoch, offset = divmod(pos, self.n_rows)
            out.append(self._perm(epoch)[offset])
        return out


def pad_right(
    seqs: list[list[int]], masks: list[list[int]], pad_id: int
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Right-padded ids, float loss mask and the number of padding tokens."""
    T = max(len(s) for s in seqs)
    ids_BT = torch.full((len(seqs), T), pad_id, dtype=torch.long)
    mask_BT = torch.zeros((len(seqs), T), dtype=torch.float32)
    for i, (s, m) in enumerate(zip(seqs, masks, strict=True)):
        ids_BT[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        mask_BT[i, : len(m)] = torch.tensor(m, dtype=torch.float32)
    padding = sum(T - len(s) for s in seqs)
    return ids_BT, mask_BT, padding


def collate_sft(batch: list[SFTExample], pad_id: int) -> tuple[torch.Tensor, torch.Tensor, int]:
    return pad_right([e.ids for e in batch], [e.mask for e in batch], pad_id)


def collate_pairs(
    batch: list[PairExample], pad_id: int
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Chosen sequences in rows 0..B-1, rejected in rows B..2B-1; mask covers replies."""
    seqs, masks = [], []
    for side in ("chosen", "rejected"):
        for e in batch:
            reply = getattr(e, side)
            seqs.append(e.prompt + reply)
            masks.append([0] * len(e.prompt) + [1] * len(reply))
    return pad_right(seqs, masks, pad_id)
