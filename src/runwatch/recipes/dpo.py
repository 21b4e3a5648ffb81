"""DPO recipe: direct preference optimisation on (prompt, chosen, rejected) pairs.

    python -m runwatch.recipes.dpo init_from=runs/<sft-run> key=value ...

The reference is a frozen copy of the starting model. Each step logs loss and pairs
(plus the optimizer fields and timing); every val_interval steps, and once before
training, validation logs val/preference_accuracy, val/mean_chosen_delta,
val/mean_rejected_delta and val/mean_margin, where a delta is the shift of a reply's
log-probability from the reference's.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from runwatch.recipes import data as prep
from runwatch.recipes.batches import BatchOrder, PairExample, collate_pairs, fit_pairs
from runwatch.recipes.build import Policy, build_policy
from runwatch.recipes.config import DPOConfig
from runwatch.recipes.inference import sequence_logprobs
from runwatch.recipes.memory import MemoryMeter
from runwatch.recipes.optim import (
    UpdateMeter,
    apply_update,
    build_optimizer,
    linear_lr,
    set_lr,
    trainable_parameters,
)
from runwatch.recipes.runtime import (
    Recorder,
    log_engine_config,
    recipe_main,
    report_after_training,
    resume_step,
)
from runwatch.recipes.steps import Shown, StepContext, StepResult
from runwatch.recipes.tasks import dpo_rows, make_task


def pair_logprobs(model: nn.Module, batch: list[PairExample], pad_id: int
                  ) -> tuple[torch.Tensor, torch.Tensor, int, int]:
    """Summed reply log-probabilities (chosen_B, rejected_B), token and padding counts."""
    ids_BT, mask_BT, padding = collate_pairs(batch, pad_id)
    logp_B = sequence_logprobs(model, ids_BT, mask_BT)
    n = len(batch)
    return logp_B[:n], logp_B[n:], ids_BT.numel(), padding


def dpo_terms(policy: Policy, batch: list[PairExample], beta: float, rpo_alpha: float
              ) -> dict[str, torch.Tensor]:
    """Loss and the per-pair deltas of one batch (deltas are detached).

    The loss is DPO's `-log sigmoid(beta * margin)` plus `rpo_alpha` times the chosen
    replies' mean per-token negative log-likelihood: without that anchor, a model that
    already answers right can only widen the margin by lowering both replies, and its
    greedy accuracy falls while preference accuracy rises.
    """
    assert policy.reference is not None
    with torch.no_grad():
        ref_c_B, ref_r_B, _, _ = pair_logprobs(policy.reference, batch, policy.tok.pad_id)
    pi_c_B, pi_r_B, tokens, padding = pair_logprobs(policy.model, batch, policy.tok.pad_id)
    chosen_B, rejected_B = pi_c_B - ref_c_B, pi_r_B - ref_r_B
    margin_B = chosen_B - rejected_B
    dpo_loss = -F.logsigmoid(beta * margin_B).mean()
    n_chosen_B = torch.tensor([len(e.chosen) for e in batch], dtype=pi_c_B.dtype)
    chosen_nll = (-pi_c_B / n_chosen_B).mean()
    return {
        "loss": dpo_loss + rpo_alpha * chosen_nll,
        "dpo_loss": dpo_loss.detach(), "chosen_nll": chosen_nll.detach(),
        "chosen_B": chosen_B.detach(), "rejected_B": rejected_B.detach(),
        "margin_B": margin_B.detach(),
        "tokens": torch.tensor(tokens), "padding": torch.tensor(padding),
    }


def summarize(terms: list[dict[str, torch.Tensor]], prefix: str) -> dict[str, float]:
    chosen_B = torch.cat([t["chosen_B"] for t in terms])
    rejected_B = torch.cat([t["rejected_B"] for t in terms])
    margin_B = chosen_B - rejected_B
    return {
        f"{prefix}preference_accuracy": float((margin_B > 0).float().mean()),
        f"{prefix}mean_chosen_delta": float(chosen_B.mean()),
        f"{prefix}mean_rejected_delta": float(rejected_B.mean()),
        f"{prefix}mean_margin": float(margin_B.mean()),
    }


@torch.no_grad()
def validate(cfg: DPOConfig, policy: Policy, val: list[PairExample], step: int,
             rec: Recorder) -> dict[str, float]:
    policy.model.eval()
    terms = [dpo_terms(policy, val[i : i + 256], cfg.beta, cfg.rpo_alpha)
             for i in range(0, len(val), 256)]
    policy.model.train()
    metrics = summarize(terms, "val/")
    for key in ("loss", "dpo_loss", "chosen_nll"):
        metrics[f"val/{key}"] = sum(float(t[key]) * len(t["margin_B"]) for t in terms) / len(val)
    if cfg.export_samples:
        margins = torch.cat([t["margin_B"] for t in terms]).tolist()
        tok = policy.tok
        rec.run.log_samples(step, [
            {"prompt": tok.decode(e.prompt), "completion": tok.decode(e.chosen),
             "rejected": tok.decode(e.rejected), "reward": cfg.beta * m, "margin": m,
             "prompt_tokens": len(e.prompt), "completion_tokens": len(e.chosen)}
            for e, m in zip(val[:64], margins[:64], strict=False)
        ], split="val")
    return metrics


def load_rows(cfg: DPOConfig) -> tuple[list[Any], list[Any]]:
    if cfg.data_path:
        val = prep.read_jsonl(cfg.val_data_path, "val_data_path") if cfg.val_data_path else []
        return prep.read_jsonl(cfg.data_path), val
    return dpo_rows(make_task(cfg.task, cfg.digits), cfg.n_train, cfg.n_val, cfg.seed)


def train(cfg: DPOConfig, rec: Recorder) -> None:
    train_rows, val_rows = load_rows(cfg)
    train_checked = prep.check_rows(train_rows, prep.check_dpo_row, rec.progress)
    val_checked = prep.check_rows(val_rows, prep.check_dpo_row, rec.progress)

    rec.progress("loading model", None, None)
    policy = build_policy(cfg, with_reference=True)
    model, tok = policy.model, policy.tok
    max_len = min(cfg.max_seq_length, policy.max_seq_len)

    def encode(row: prep.PreferenceRow) -> prep.Encoded:
        return prep.encode_dpo(tok, row)

    encoded = prep.tokenize_rows(train_checked, encode,
                                 prep.cache_key(train_rows, tok.name, "dpo"),
                                 prep.cache_path(cfg.cache_dir), rec.progress, rec.text)
    pairs, fit = fit_pairs(encoded, max_len)
    val_pairs, _ = fit_pairs([encode(r) for r in val_checked], max_len)
    rec.text("info", f"data fit: {fit.as_dict()}", {"data_fit": fit.as_dict()})

    params = trainable_parameters(model)
    optimizer = build_optimizer(params, cfg.learning_rate, cfg.weight_decay)
    log_engine_config(rec, cfg, policy, optimizer)
    start = resume_step(rec, cfg, model, optimizer)
    order = BatchOrder(len(pairs), cfg.batch_size, cfg.seed)
    meter = UpdateMeter(params)
    memory = MemoryMeter(model, optimizer, extra_weights=policy.reference)
    steps = StepContext(
        rec, cfg, policy, optimizer,
        (lambda at: validate(cfg, policy, val_pairs, at, rec)) if val_pairs else None,
        (Shown("loss", 4), Shown("val/preference_accuracy", 3), Shown("val/mean_margin", 3)))

    rec.run.set_phase("RUNNING")
    if start == 0 and val_pairs:
        # The baseline: every delta is zero before the first update.
        rec.log(validate(cfg, policy, val_pairs, 0, rec), 0)
    for step in range(start + 1, cfg.max_steps + 1):
        t0 = time.perf_counter()
        lr = linear_lr(step, cfg.max_steps, cfg.learning_rate, cfg.warmup_steps)
        set_lr(optimizer, lr)
        batch = [pairs[i] for i in order.indices(step)]
        optimizer.zero_grad(set_to_none=True)
        with memory.track_activations():
            terms = dpo_terms(policy, batch, cfg.beta, cfg.rpo_alpha)
        terms["loss"].backward()
        t1 = time.perf_counter()
        metrics: dict[str, Any] = apply_update(optimizer, params, cfg.max_grad_norm, meter)
        t2 = time.perf_counter()
        fit.add_batch(int(terms["tokens"]), int(terms["padding"]))
        metrics.update({
            "loss": terms["loss"].item(),
            "dpo_loss": terms["dpo_loss"].item(),
            "chosen_nll": terms["chosen_nll"].item(),
            "pairs": len(batch),
            "learning_rate": lr,
            "padding_fraction": float(terms["padding"]) / float(terms["tokens"]),
            "timing/step_forward_backward_s": t1 - t0,
            "timing/step_optim_s": t2 - t1,
            **summarize([terms], ""),
        })
        metrics.update(memory.observe(step) or {})
        metrics.update(steps.validation(step))
        steps.end(StepResult(step, t0, metrics))

    report_after_training(rec, fit, memory)


def main(argv: list[str] | None = None) -> int:
    return recipe_main(DPOConfig, "dpo", __doc__, argv, train)


if __name__ == "__main__":
    sys.exit(main())
