"""docs/jobs.md is what `python -m runwatch.jobs.docs` writes now, and its config example
loads into the profiles it describes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from runwatch.jobs import docs
from runwatch.jobs.cost import GIB, DeviceProfile, load_profiles
from runwatch.jobs.failures import CATALOGUE
from runwatch.jobs.lifecycle import TRANSITIONS

REPO = Path(__file__).resolve().parents[2]


def test_docs_page_is_current() -> None:
    page = (REPO / "docs" / "jobs.md").read_text(encoding="utf-8")
    assert page == docs.render(), "docs/jobs.md is stale: run python -m runwatch.jobs.docs"


def test_the_page_holds_every_move_and_every_reason() -> None:
    page = docs.render()
    assert all(f"| {a} | {b} |" in page for a, targets in TRANSITIONS.items() for b in targets)
    assert all(f"| `{r.id}` |" in page and r.what_to_do in page for r in CATALOGUE.values())


def test_the_config_example_loads() -> None:
    profiles = load_profiles(yaml.safe_load(docs.CONFIG_EXAMPLE))
    assert profiles.get() == DeviceProfile("a100x8", 8, 80 * GIB, 1024 * GIB, 2.5)
    assert profiles.get("cpu").hourly_rate == 0.2


def test_the_generator_writes_the_page(tmp_path: Path) -> None:
    out = tmp_path / "jobs.md"
    subprocess.run([sys.executable, "-m", "runwatch.jobs.docs", str(out)], check=True,
                   capture_output=True, timeout=60)
    assert out.read_text(encoding="utf-8") == docs.render()
