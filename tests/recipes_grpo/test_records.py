"""What a GRPO run records besides its metrics: log lines, the engine configuration
before the first step, and the peak-memory breakdown (issue 13)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .conftest import grpo


def _logs(run: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run / "logs.jsonl").read_text().splitlines()]


def test_a_grpo_run_logs_its_engine_configuration_progress_and_peak_memory(
        tmp_path: Path, sft_run: Path) -> None:
    lines = grpo(tmp_path, "max_steps=2", "val_interval=1", "beta=0.1", "n_val=8",
                 init=sft_run)
    run = tmp_path / "grpo"

    engine = json.loads((run / "engine_config.json").read_text())
    assert engine["requested"]["group_size"] == 6 and engine["requested"]["beta"] == 0.1
    resolved = engine["resolved"]
    assert resolved["collection"] == "sync" and resolved["reference_model"] is True
    assert resolved["trainable_parameters"] > 0 and resolved["optimizer"]["type"] == "AdamW"

    messages = [str(r["message"]) for r in _logs(run)]
    # The engine configuration and the prompts come before the first step's line.
    start = next(i for i, m in enumerate(messages) if "validation prompts" in m)
    assert start < messages.index(next(m for m in messages if m.startswith("step 0/2")))
    assert [m.split()[1] for m in messages if m.startswith("step ")] == ["0/2", "1/2", "2/2"]

    peak = next(r for r in _logs(run) if "memory" in (r.get("data") or {}))
    memory = peak["data"]["memory"]
    parts = memory["bytes"]
    # The reference model's weights count with the policy's; the generator's copy and the
    # published snapshot are the generation phase's share.
    assert parts["weights"] > 0 and parts["activations"] > 0 and parts["gradients"] > 0
    assert parts["generation"] >= parts["weights"]
    assert "generation" in memory["how_measured"]
    first = next(line for line in lines if "memory/total_bytes" in line)
    assert first["step"] == 0 and first["memory/generation_bytes"] > 0
