"""Every metric the bundled recipes write is in the vocabulary, with the recipes that write it.

Runs SFT, DPO and GRPO (single-turn with an adapter, a KL term and two minibatches;
dynamic sampling; async; multi-turn) for two steps each, in one process with a tiny
model, and reads the keys of their metrics.jsonl.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import torch

from runwatch.metrics import BY_NAME, METRICS
from runwatch.recipes import dpo, sft
from runwatch.recipes.config import parse_argv
from runwatch.recipes.grpo.config import GRPOConfig
from runwatch.recipes.grpo.loop import run_grpo

RECORD_FIELDS = {"step", "seq", "ts"}
SUPERVISED = ["n_layer=1", "n_head=2", "d_model=32", "max_seq_length=32", "batch_size=8",
              "n_train=64", "n_val=8", "wandb_project=None", "cache_dir=None",
              "max_steps=2", "val_interval=1"]
# digit_overlap scores partly right answers, so an untrained model's groups have
# reward variance and train (exact match would skip every group).
GRPO_BASE = ["n_layer=1", "n_head=2", "d_model=32", "max_seq_length=48",
             "wandb_project=None", "max_steps=2", "batch_size=2", "group_size=3",
             "n_train=200", "n_val=4", "validation_interval=1", "export_samples=false",
             "reward=digit_overlap", "temperature=1.0", "max_sample_tokens=6"]
GRPO_MODES = {
    "grpo_single_turn": ["beta=0.1", "lora_rank=4", "num_minibatches=2"],
    "grpo_dynamic_sampling": ["max_sampling_attempts=3"],
    "grpo_async": ["max_steps_off_policy=1", "groups_in_flight=4"],
    "grpo_multi_turn": ["env=guess_number", "max_turns=3", "guess_max=9",
                        "max_sample_tokens=3"],
}


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, set[str]]]:
    """Each metric key the recipes wrote, with the recipes (sft, dpo, grpo) that wrote it."""
    runs = tmp_path_factory.mktemp("runs")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert sft.main([*SUPERVISED, f"runs_dir={runs}", "name=sft"]) == 0
        assert dpo.main([*SUPERVISED, f"runs_dir={runs}", "name=dpo",
                         f"init_from={runs / 'sft'}", "lora_rank=4"]) == 0
        for name, extra in GRPO_MODES.items():
            cfg = parse_argv(GRPOConfig, [*GRPO_BASE, f"runs_dir={runs}", f"name={name}", *extra])
            assert run_grpo(cfg) == 0
    finally:
        torch.set_num_threads(threads)
    keys: dict[str, set[str]] = {}
    for run in runs.iterdir():
        for line in (run / "metrics.jsonl").read_text().splitlines():
            for key in set(json.loads(line)) - RECORD_FIELDS:
                keys.setdefault(key, set()).add(run.name.split("_")[0])
    yield keys


def test_every_written_key_is_a_canonical_metric(written: dict[str, set[str]]) -> None:
    assert sorted(set(written) - set(BY_NAME)) == []


def test_the_vocabulary_names_the_recipes_that_write_each_metric(
        written: dict[str, set[str]]) -> None:
    wrong = {k: (sorted(BY_NAME[k].recipes), sorted(v)) for k, v in written.items()
             if k in BY_NAME and set(BY_NAME[k].recipes) != v}
    assert wrong == {}, "catalogue recipes vs written: fix runwatch/metrics/catalogue.py"
    claimed = {m.name for m in METRICS if m.recipes}
    assert sorted(claimed - set(written)) == []
