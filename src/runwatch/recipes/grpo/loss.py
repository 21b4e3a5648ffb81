"""The GRPO loss: a clipped importance-ratio objective with an optional KL to a reference.

The ratio compares the trainer's log-probabilities with the generator's, so it is 1
exactly when both hold the same weights; it drifts when rollouts are stale or when a
batch is split into several updates. Its health metrics come back under `fb/loss/`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from runwatch.recipes.grpo.rollout import Sample
from runwatch.recipes.inference import token_logprobs


@dataclass
class Batch:
    """Right-padded tensors for a list of samples; `_BT1` tensors align with ids[:, 1:]."""

    ids_BT: torch.Tensor
    valid_BT: torch.Tensor       # real tokens (prompt and completion), not padding
    mask_BT1: torch.Tensor       # trained tokens, as float
    gen_logp_BT1: torch.Tensor
    adv_B: torch.Tensor


def make_batch(samples: list[Sample], pad_id: int) -> Batch:
    T = max(len(s.ids) for s in samples)
    B = len(samples)
    ids_BT = torch.full((B, T), pad_id, dtype=torch.long)
    valid_BT = torch.zeros((B, T), dtype=torch.bool)
    mask_BT = torch.zeros((B, T))
    gen_BT = torch.zeros((B, T))
    for i, s in enumerate(samples):
        n = len(s.ids)
        ids_BT[i, :n] = torch.tensor(s.ids)
        valid_BT[i, :n] = True
        mask_BT[i, :n] = torch.tensor(s.gen_mask, dtype=torch.float32)
        gen_BT[i, :n] = torch.tensor(s.gen_logprobs, dtype=torch.float32)
    # The first token is never predicted, so everything shifts by one to match logp.
    return Batch(ids_BT=ids_BT, valid_BT=valid_BT, mask_BT1=mask_BT[:, 1:],
                 gen_logp_BT1=gen_BT[:, 1:],
                 adv_B=torch.tensor([s.advantage for s in samples], dtype=torch.float32))


def grpo_loss(
    model: nn.Module,
    batch: Batch,
    clip_low: float,
    clip_high: float,
    beta: float = 0.0,
    ref_model: nn.Module | None = None,
    aggregation: str = "token_mean",
) -> tuple[torch.Tensor, dict[str, float]]:
    """The loss to minimise and its `fb/loss/*` metrics for one update."""
    # Right padding with no attention mask: causality alone keeps padding out of the
    # real tokens' view, exactly as the generator saw them.
    logp_BT1 = token_logprobs(model, batch.ids_BT)
    mask_BT1 = batch.mask_BT1
    n_tok = mask_BT1.sum().clamp(min=1.0)
    log_ratio_BT1 = (logp_BT1 - batch.gen_logp_BT1) * mask_BT1
    ratio_BT1 = torch.exp(log_ratio_BT1)
    clipped_BT1 = ratio_BT1.clamp(clip_low, clip_high)
    adv_BT1 = batch.adv_B[:, None].expand_as(ratio_BT1)
    # Pessimistic bound: take the smaller objective, so a token whose ratio has moved
    # past the band in the advantage's direction stops pushing.
    obj_BT1 = torch.minimum(ratio_BT1 * adv_BT1, clipped_BT1 * adv_BT1)
    per_tok_BT1 = -obj_BT1
    metrics: dict[str, float] = {}
    if beta > 0 and ref_model is not None:
        with torch.no_grad():
            ref_logp_BT1 = token_logprobs(ref_model, batch.ids_BT)
        # k3 estimator of KL(policy || ref): unbiased and always >= 0.
        d_BT1 = ref_logp_BT1 - logp_BT1
        kl_ref_BT1 = (torch.exp(d_BT1) - 1 - d_BT1).clamp(min=0) * mask_BT1
        per_tok_BT1 = per_tok_BT1 + beta * kl_ref_BT1
        metrics["fb/loss/kl_ref/mean"] = float(kl_ref_BT1.detach().sum() / n_tok)
    per_tok_BT1 = per_tok_BT1 * mask_BT1
    if aggregation == "token_mean":
        loss = per_tok_BT1.sum() / n_tok
    else:
        per_seq_B = per_tok_BT1.sum(1) / mask_BT1.sum(1).clamp(min=1.0)
        loss = per_seq_B.mean()
    with torch.no_grad():
        lr_BT1 = log_ratio_BT1.detach()
        r_BT1 = ratio_BT1.detach()
        on = mask_BT1 > 0
        high = on & (adv_BT1 > 0) & (r_BT1 > clip_high)
        low = on & (adv_BT1 < 0) & (r_BT1 < clip_low)
        metrics.update({
            "fb/loss/ratio/mean": float((r_BT1 * mask_BT1).sum() / n_tok),
            # k1 (E_gen[log q - log p]) and k3 estimators of KL(generator || trainer).
            "fb/loss/kl_policy/mean": float((-lr_BT1 * mask_BT1).sum() / n_tok),
            # Clamped: r - 1 - log r >= 0 holds exactly, but not always in float32.
            "fb/loss/kl_policy/k3/mean":
                float(((r_BT1 - 1 - lr_BT1).clamp(min=0) * mask_BT1).sum() / n_tok),
            "fb/loss/clip/high_fraction": float(high.sum() / n_tok),
            "fb/loss/clip/low_fraction": float(low.sum() / n_tok),
            "fb/loss/clip/clipped_ratio/mean":
                float((clipped_BT1.detach() * mask_BT1).sum() / n_tok),
            "fb/loss/aggregate/active_fraction":
                float(mask_BT1.sum() / batch.valid_BT.sum().clamp(min=1)),
            "loss": float(loss.detach()),
        })
    return loss, metrics
