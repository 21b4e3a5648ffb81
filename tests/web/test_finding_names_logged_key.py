"""A health finding's footer in a real browser on a real server (trial 35, D6: a run that
logged `kl` read `grpo.kl_ref_drift · fb/loss/kl_ref/mean`, a name it never logged): the
footer names the key the run logged, as the finding's message does, and keeps the
canonical name in its tooltip."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from runwatch.sdk import Run, init
from runwatch.server.runner import Runner

from .webhelpers import open_run, shot, wait_indexed

pytestmark = pytest.mark.module_server


def test_a_finding_names_the_key_the_run_logged(page: Page, server: Runner,
                                                runs_dir: Path) -> None:
    run = init(name="logs-kl", dir=runs_dir, method="grpo", base_model="tiny",
               dataset="arith")
    assert isinstance(run, Run)
    for step in range(300):  # a KL to the reference that grows without bound
        run.log({"reward": min(1.0, step / 200), "kl": 0.01 * step, "loss": 0.1}, step=step)
    run.finish("SUCCEEDED")
    wait_indexed(server.url, "logs-kl", 299)
    open_run(page, server.url, "logs-kl")
    finding = page.locator("#health .finding", has_text="KL to the reference keeps growing")
    expect(finding.locator("p").first).to_contain_text("kl rose")
    footer = finding.locator("p.muted.small")
    expect(footer).to_have_text("grpo.kl_ref_drift · kl")
    expect(footer.locator('[data-metric="fb/loss/kl_ref/mean"]')).to_have_attribute(
        "title", "canonical name: fb/loss/kl_ref/mean")
    shot(page, "trial-finding-logged-key")
