"""A setting of a project's thresholds keeps the number it was written as: the token
budget `max_sample_tokens: 1024` of docs/health.md is stored and shown as 1024, not 1024.0.

Found in a trial (trial37, defect 5): `runwatch thresholds demo thr.yaml`, then
`runwatch thresholds demo`, showed `max_sample_tokens: 1024.0`."""

from __future__ import annotations

from pathlib import Path

import yaml

from runwatch.health.thresholds import parse
from tests.support.cli import cli_here, run_cli

DOC_EXAMPLE = """\
rules:
  grpo.clip_high: {above: 0.15}
settings:            # budgets the run's config does not give
  max_sample_tokens: 1024
  batch_size: 8.5
"""


def test_a_stored_setting_is_shown_as_it_was_written(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    (tmp_path / "thr.yaml").write_text(DOC_EXAMPLE)
    run_cli("thresholds", "demo", str(tmp_path / "thr.yaml"), "--dir", str(runs))
    shown = cli_here("thresholds", "demo", "--dir", str(runs)).stdout
    assert "max_sample_tokens: 1024\n" in shown, shown
    settings = yaml.safe_load(shown)["settings"]
    assert settings == {"max_sample_tokens": 1024, "batch_size": 8.5}
    assert type(settings["max_sample_tokens"]) is int


def test_parsed_settings_keep_ints_and_floats() -> None:
    got = parse({"settings": {"max_sample_tokens": 1024, "batch_size": 8.5}}).settings
    assert [(k, type(v)) for k, v in sorted(got.items())] == [("batch_size", float),
                                                             ("max_sample_tokens", int)]
