"""End to end: the recipes' default runs raise no warning, and each GRPO pathology preset
raises the rule that names its problem. Real recipe runs, indexed into real SQLite.

The presets start from an SFT run on addition, trained here; the default GRPO run starts
from the session's SFT checkpoint on sorting (tests/conftest.py `sft_checkpoint`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
grpo_loop = pytest.importorskip("runwatch.recipes.grpo.loop")

from runwatch.health import store as health_store  # noqa: E402
from runwatch.ingest.indexer import Indexer  # noqa: E402
from runwatch.recipes import dpo, sft  # noqa: E402
from runwatch.recipes.config import parse_argv  # noqa: E402
from runwatch.recipes.grpo.config import GRPOConfig  # noqa: E402
from runwatch.recipes.grpo.pathologies import PATHOLOGIES, expand  # noqa: E402
from runwatch.store import open_engine  # noqa: E402
from runwatch.store import queries as q  # noqa: E402
from tests.support import SORT_TASK, TINY_MODEL  # noqa: E402

pytestmark = pytest.mark.slow

COMMON = ["wandb_project=None", "export_samples=false", "checkpoint_interval=1000"]
# The rule each preset must raise (any one of the set).
EXPECTED = {
    "high_lr": {"grpo.ratio_extreme", "grpo.ratio_drift", "grpo.clip_high", "grpo.clip_low"},
    "stale": {"grpo.ratio_extreme", "grpo.ratio_drift", "grpo.kl_policy_spike",
              "async.dropped_stale"},
    "reward_hack": {"grpo.reward_hacking", "grpo.length_runaway"},
    "tight_budget": {"grpo.truncation"},
    "too_hard": {"grpo.zero_variance"},
    "too_easy": {"grpo.saturated_groups"},
}
SERIOUS = ("warning", "critical")


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.set_num_threads(1)
    d = tmp_path_factory.mktemp("runs")
    assert sft.main([*TINY_MODEL, *COMMON, f"runs_dir={d}", "name=sft", "max_steps=150",
                     "batch_size=32", "learning_rate=3e-3", "warmup_steps=10", "n_train=2000",
                     "n_val=64", "val_interval=50", "cache_dir=None"]) == 0
    return d


def findings(runs: Path, name: str) -> list[dict[str, Any]]:
    engine = open_engine(runs / ".runwatch" / "index.db")
    try:
        Indexer(engine, runs, hooks=[health_store.on_metrics]).index_once()
        with engine.begin() as conn:
            row = q.resolve_run(conn, name)
            return health_store.health_for_run(conn, row.pk, now=0)
    finally:
        engine.dispose()


def serious(found: list[dict[str, Any]]) -> list[str]:
    return [f"{f['rule_id']}: {f['message']}" for f in found if f["severity"] in SERIOUS]


def grpo(runs: Path, name: str, *settings: str) -> None:
    base = [*COMMON, f"runs_dir={runs}", f"name={name}", f"init_from={runs / 'sft'}",
            "n_train=2000", "n_val=32", "max_steps=30", "val_interval=5", "batch_size=8"]
    assert grpo_loop.run_grpo(parse_argv(GRPOConfig, [*base, *expand(list(settings))])) == 0


def test_sft_default_is_healthy(runs: Path) -> None:
    assert serious(findings(runs, "sft")) == []


def test_dpo_default_is_healthy(runs: Path) -> None:
    assert dpo.main([*COMMON, f"runs_dir={runs}", "name=dpo", f"init_from={runs / 'sft'}",
                     "max_steps=40", "val_interval=10", "cache_dir=None"]) == 0
    assert serious(findings(runs, "dpo")) == []


def test_grpo_default_is_healthy(runs: Path, sft_checkpoint: Path) -> None:
    # GRPO needs a start that is partly right (a model that always fails, or always
    # succeeds, gives groups with no reward variance: the health engine rightly warns).
    # The session's SFT checkpoint, partly right at 4-digit sorting, is that start; GRPO
    # then runs with its defaults, shortened.
    args = [*COMMON, *SORT_TASK, f"runs_dir={runs}", "name=grpo-default",
            f"init_from={sft_checkpoint}", "n_train=2000", "n_val=64", "max_steps=20",
            "val_interval=5"]
    assert grpo_loop.run_grpo(parse_argv(GRPOConfig, args)) == 0
    assert serious(findings(runs, "grpo-default")) == []


@pytest.mark.parametrize("preset", sorted(EXPECTED))
def test_pathology_raises_its_rule(runs: Path, preset: str) -> None:
    assert set(EXPECTED) == set(PATHOLOGIES), "a new preset needs its expected rule here"
    grpo(runs, f"grpo-{preset}", f"pathology={preset}")
    # A listed finding may stand for several rules of one signal (evidence.incident).
    raised = {i["rule_id"] for f in findings(runs, f"grpo-{preset}")
              for i in f["evidence"].get("incident", [f])}
    assert raised & EXPECTED[preset], f"{preset} raised only {sorted(raised)}"
