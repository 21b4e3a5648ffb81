"""The GRPO loss on real rollouts: on-policy the first update has ratio 1 and no clipping."""

from __future__ import annotations

from pathlib import Path

import torch

from runwatch.recipes.build import build_policy
from runwatch.recipes.config import parse_argv
from runwatch.recipes.grpo.config import GRPOConfig
from runwatch.recipes.grpo.loop import make_env
from runwatch.recipes.grpo.loss import grpo_loss, make_batch
from runwatch.recipes.grpo.rollout import assign_advantages
from runwatch.recipes.grpo.weights import GeneratorPolicy, WeightsChannel

from .conftest import TASK, TINY


def _batch(sft_run: Path, *settings: str):  # type: ignore[no-untyped-def]
    cfg = parse_argv(GRPOConfig, [f"init_from={sft_run}", "wandb_project=None",
                                  "n_train=2000", "n_val=8", "max_sample_tokens=6", *TASK,
                                  *settings])
    policy = build_policy(cfg)
    env, train_q, _ = make_env(cfg, policy.tok)
    gen = GeneratorPolicy(policy.model, WeightsChannel(policy.model), in_flight=False)
    groups = env.rollout(gen, train_q[:16], 8, 1.0, torch.Generator().manual_seed(0))
    for g in groups:
        assign_advantages(g)
    assert any(g.has_variance for g in groups), "no group to learn from; sample more"
    samples = [s for g in groups for s in g.samples]
    return cfg, policy, make_batch(samples, policy.tok.pad_id)


def test_first_update_on_policy_has_ratio_one_and_no_clipping(sft_run: Path) -> None:
    cfg, policy, batch = _batch(sft_run)
    loss, fb = grpo_loss(policy.model, batch, cfg.clip_low_threshold, cfg.clip_high_threshold)
    assert abs(fb["fb/loss/ratio/mean"] - 1.0) < 1e-4
    assert fb["fb/loss/clip/high_fraction"] == 0.0
    assert fb["fb/loss/clip/low_fraction"] == 0.0
    assert abs(fb["fb/loss/kl_policy/k3/mean"]) < 1e-6
    assert "fb/loss/kl_ref/mean" not in fb
    assert 0 < fb["fb/loss/aggregate/active_fraction"] < 1

    # A large step on the same batch makes the second update off-policy.
    opt = torch.optim.SGD(policy.model.parameters(), lr=2.0)
    loss.backward()
    opt.step()
    _, fb2 = grpo_loss(policy.model, batch, cfg.clip_low_threshold, cfg.clip_high_threshold)
    assert abs(fb2["fb/loss/ratio/mean"] - 1.0) > 1e-3
    assert fb2["fb/loss/kl_policy/k3/mean"] > 0


def test_kl_to_reference_only_with_beta(sft_run: Path) -> None:
    cfg, policy, batch = _batch(sft_run, "beta=0.1")
    ref = build_policy(cfg).model
    _, fb = grpo_loss(policy.model, batch, 0.8, 1.28, beta=0.1, ref_model=ref)
    assert abs(fb["fb/loss/kl_ref/mean"]) < 1e-6


def test_fresh_model_rollout_is_aligned(tmp_path: Path) -> None:
    # Multi-turn sequences interleave generated and environment tokens; the trainer
    # must still see exactly the generator's probabilities on every generated token.
    cfg = parse_argv(GRPOConfig, [*TINY, "wandb_project=None", "env=guess_number",
                                  "max_turns=3", "n_train=16", "n_val=4", "max_sample_tokens=3",
                                  "guess_max=9"])
    policy = build_policy(cfg)
    env, train_q, _ = make_env(cfg, policy.tok)
    gen = GeneratorPolicy(policy.model, WeightsChannel(policy.model), in_flight=False)
    groups = env.rollout(gen, train_q[:4], 4, 1.0, torch.Generator().manual_seed(1))
    for g in groups:
        assign_advantages(g)
    batch = make_batch([s for g in groups for s in g.samples], policy.tok.pad_id)
    _, fb = grpo_loss(policy.model, batch, 0.8, 1.28)
    assert abs(fb["fb/loss/ratio/mean"] - 1.0) < 1e-4
