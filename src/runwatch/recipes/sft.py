"""SFT recipe: supervised fine-tuning on chat rows, loss on assistant tokens only.

    python -m runwatch.recipes.sft key=value ...     (or `runwatch recipes sft`)

Per step it logs loss (mean cross-entropy per trained token), loss_sum,
trained_tokens, learning_rate, samples, the optimizer fields and timing; every
val_interval steps val/loss and val/accuracy (greedy exact match).
"""

from __future__ import annotations

import sys
import time
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from runwatch.recipes import data as prep
from runwatch.recipes.batches import BatchOrder, SFTExample, collate_sft, fit_sft
from runwatch.recipes.build import Policy, build_policy
from runwatch.recipes.chat import Message, render_prompt, split_reply
from runwatch.recipes.config import SFTConfig, TrainConfig
from runwatch.recipes.inference import generate
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
from runwatch.recipes.tasks import make_task, sft_rows


def sft_loss(model: nn.Module, ids_BT: torch.Tensor, mask_BT: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """(sum of cross-entropy over trained tokens, number of trained tokens)."""
    logits_BTV = model(ids_BT)
    B, T = ids_BT.shape
    ce_BT1 = F.cross_entropy(
        logits_BTV[:, :-1].reshape(B * (T - 1), -1).float(),
        ids_BT[:, 1:].reshape(-1), reduction="none",
    ).view(B, T - 1)
    weight_BT1 = mask_BT[:, 1:]
    return (ce_BT1 * weight_BT1).sum(), weight_BT1.sum()


def load_rows(cfg: TrainConfig) -> tuple[list[Any], list[Any]]:
    if cfg.data_path:
        val = prep.read_jsonl(cfg.val_data_path, "val_data_path") if cfg.val_data_path else []
        return prep.read_jsonl(cfg.data_path), val
    return sft_rows(make_task(cfg.task, cfg.digits), cfg.n_train, cfg.n_val, cfg.seed)


@torch.no_grad()
def validate(
    cfg: SFTConfig, policy: Policy, val_examples: list[SFTExample],
    val_convs: list[list[Message]], step: int, rec: Recorder,
) -> dict[str, float]:
    """val/loss over the validation rows and val/accuracy of greedy replies."""
    model, tok = policy.model, policy.tok
    model.eval()
    loss_sum, tokens = 0.0, 0.0
    for i in range(0, len(val_examples), cfg.val_batch_size):
        ids_BT, mask_BT, _ = collate_sft(val_examples[i : i + cfg.val_batch_size], tok.pad_id)
        batch_sum, batch_tokens = sft_loss(model, ids_BT, mask_BT)
        loss_sum, tokens = loss_sum + batch_sum.item(), tokens + batch_tokens.item()
    correct, lengths, samples = 0, 0, []
    for i in range(0, len(val_convs), cfg.val_batch_size):
        chunk = [split_reply(c) for c in val_convs[i : i + cfg.val_batch_size]]
        prompts = [render_prompt(tok, p) for p, _ in chunk]
        room = max(1, policy.max_seq_len - max(len(p) for p in prompts))
        gens = generate(model, prompts, min(cfg.max_new_tokens, room), 0.0,
                        tok.end_id, tok.pad_id)
        for (prompt, reference), ids, gen in zip(chunk, prompts, gens, strict=True):
            text = tok.decode(gen.tokens)
            ok = gen.finished and text == reference
            correct += int(ok)
            lengths += len(gen.tokens)
            samples.append({
                "prompt": prompt[-1]["content"], "completion": text, "reference": reference,
                "reward": float(ok), "truncated": not gen.finished,
                "prompt_tokens": len(ids), "completion_tokens": len(gen.tokens),
            })
    model.train()
    if cfg.export_samples and samples:
        rec.run.log_samples(step, samples, split="val")
    n = max(1, len(val_convs))
    return {
        "val/loss": loss_sum / tokens if tokens else float("nan"),
        "val/accuracy": correct / n,
        "val/mean_response_length": lengths / n,
    }


def train(cfg: SFTConfig, rec: Recorder) -> None:
    train_rows, val_rows = load_rows(cfg)
    train_convs = prep.check_rows(train_rows, prep.check_sft_row, rec.progress)
    val_convs = prep.check_rows(val_rows, prep.check_sft_row, rec.progress)

    rec.progress("loading model", None, None)
    policy = build_policy(cfg)
    model, tok = policy.model, policy.tok
    max_len = min(cfg.max_seq_length, policy.max_seq_len)

    def encode(messages: list[Message]) -> prep.Encoded:
        return prep.encode_sft(tok, messages)

    cache_dir = prep.cache_path(cfg.cache_dir)
    encoded = prep.tokenize_rows(train_convs, encode,
                                 prep.cache_key(train_rows, tok.name, "sft"),
                                 cache_dir, rec.progress, rec.text)
    val_encoded = [encode(c) for c in val_convs]
    examples, fit = fit_sft(encoded, max_len)
    val_examples, _ = fit_sft(val_encoded, max_len)
    rec.text("info", f"data fit: {fit.as_dict()}", {"data_fit": fit.as_dict()})

    params = trainable_parameters(model)
    optimizer = build_optimizer(params, cfg.learning_rate, cfg.weight_decay)
    log_engine_config(rec, cfg, policy, optimizer)
    start = resume_step(rec, cfg, model, optimizer)
    order = BatchOrder(len(examples), cfg.batch_size, cfg.seed)
    meter, memory = UpdateMeter(params), MemoryMeter(model, optimizer)
    steps = StepContext(
        rec, cfg, policy, optimizer,
        (lambda at: validate(cfg, policy, val_examples, val_convs, at, rec))
        if val_examples else None,
        (Shown("loss", 4), Shown("val/loss", 4), Shown("val/accuracy", 3)))

    rec.run.set_phase("RUNNING")
    for step in range(start + 1, cfg.max_steps + 1):
        t0 = time.perf_counter()
        lr = linear_lr(step, cfg.max_steps, cfg.learning_rate, cfg.warmup_steps)
        set_lr(optimizer, lr)
        batch = [examples[i] for i in order.indices(step)]
        ids_BT, mask_BT, padding = collate_sft(batch, tok.pad_id)
        fit.add_batch(ids_BT.numel(), padding)

        optimizer.zero_grad(set_to_none=True)
        with memory.track_activations():
            loss_sum, trained = sft_loss(model, ids_BT, mask_BT)
        (loss_sum / trained).backward()
        t1 = time.perf_counter()
        metrics: dict[str, Any] = apply_update(optimizer, params, cfg.max_grad_norm, meter)
        t2 = time.perf_counter()
        metrics.update({
            "loss": loss_sum.item() / trained.item(),
            "loss_sum": loss_sum.item(),
            "trained_tokens": float(trained),
            "learning_rate": lr,
            "samples": len(batch),
            "padding_fraction": padding / ids_BT.numel(),
            "timing/step_forward_backward_s": t1 - t0,
            "timing/step_optim_s": t2 - t1,
        })
        metrics.update(memory.observe(step) or {})
        if step == start + 1:
            metrics.update({f"data_fit/{k}": v for k, v in fit.as_dict().items()
                            if k != "padding_fraction"})
        metrics.update(steps.validation(step))
        steps.end(StepResult(step, t0, metrics))

    report_after_training(rec, fit, memory)


def main(argv: list[str] | None = None) -> int:
    return recipe_main(SFTConfig, "sft", __doc__, argv, train)


if __name__ == "__main__":
    sys.exit(main())
