"""Log-probabilities and sampling for any recipe model (`model(ids_BT, mask_BT) -> logits`).

Shared by SFT validation (greedy decode), DPO (sequence log-probabilities against a
reference) and reinforcement recipes (sampled tokens with their log-probabilities).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


def token_logprobs(
    model: nn.Module, ids_BT: torch.Tensor, attention_mask_BT: torch.Tensor | None = None
) -> torch.Tensor:
    """log p(ids[:, t] | ids[:, :t]) for t = 1..T-1, shape (B, T-1)."""
    logits_BTV = model(ids_BT, attention_mask_BT)
    logp_BTV = F.log_softmax(logits_BTV[:, :-1].float(), dim=-1)
    return logp_BTV.gather(-1, ids_BT[:, 1:, None]).squeeze(-1)


def sequence_logprobs(
    model: nn.Module,
    ids_BT: torch.Tensor,
    mask_BT: torch.Tensor,
    attention_mask_BT: torch.Tensor | None = None,
) -> torch.Tensor:
    """Sum of log-probabilities of the tokens where `mask_BT` is 1, shape (B,)."""
    logp_BT1 = token_logprobs(model, ids_BT, attention_mask_BT)
    return (logp_BT1 * mask_BT[:, 1:].to(logp_BT1.dtype)).sum(dim=1)


@dataclass
class Generation:
    """One sampled completion: its tokens (the end token included if reached)."""

    tokens: list[int]
    logprobs: list[float]
    finished: bool


def left_pad(prompts: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded ids and attention mask, so every prompt ends at the last column."""
    T = max(len(p) for p in prompts)
    ids_BT = torch.full((len(prompts), T), pad_id, dtype=torch.long)
    mask_BT = torch.zeros((len(prompts), T), dtype=torch.long)
    for i, p in enumerate(prompts):
        ids_BT[i, T - len(p) :] = torch.tensor(p, dtype=torch.long)
        mask_BT[i, T - len(p) :] = 1
    return ids_BT, mask_BT


@torch.no_grad()
def generate(
    model: nn.Module,
    prompts: list[list[int]],
    max_new_tokens: int,
    temperature: float,
    end_id: int,
    pad_id: int,
    generator: torch.Generator | None = None,
) -> list[Generation]:
    """Complete each prompt; temperature 0 is greedy.

    Each step re-runs the whole (short) sequence: recipe sequences are tens of
    tokens, where a KV cache saves little and adds code to keep correct.
    """
    was_training = model.training
    model.eval()
    ids_BT, mask_BT = left_pad(prompts, pad_id)
    B = len(prompts)
    tokens: list[list[int]] = [[] for _ in range(B)]
    logps: list[list[float]] = [[] for _ in range(B)]
    done_B = torch.zeros(B, dtype=torch.bool)
    for _ in range(max_new_tokens):
        logits_BV = model(ids_BT, mask_BT)[:, -1].float()
        logp_BV = F.log_softmax(logits_BV, dim=-1)
        if temperature <= 0:
            next_B = logits_BV.argmax(dim=-1)
        else:
            probs_BV = F.softmax(logits_BV / temperature, dim=-1)
            next_B = torch.multinomial(probs_BV, 1, generator=generator).squeeze(-1)
        # The log-probability is the model's own (temperature 1) distribution: that is
        # what an importance ratio or KL against the trainer compares with.
        chosen_B = logp_BV.gather(-1, next_B[:, None]).squeeze(-1)
        live_B = ~done_B
        for i in range(B):
            if live_B[i]:
                tokens[i].append(int(next_B[i]))
                logps[i].append(float(chosen_B[i]))
        # Rows that already ended get padding that no later position may attend to.
        next_B = torch.where(live_B, next_B, torch.full_like(next_B, pad_id))
        ids_BT = torch.cat([ids_BT, next_B[:, None]], dim=1)
        mask_BT = torch.cat([mask_BT, live_B.long()[:, None]], dim=1)
        done_B |= next_B == end_id
        if bool(done_B.all()):
            break
    model.train(was_training)
    return [
        Generation(tokens=t, logprobs=lp, finished=bool(t) and t[-1] == end_id)
        for t, lp in zip(tokens, logps, strict=True)
    ]
