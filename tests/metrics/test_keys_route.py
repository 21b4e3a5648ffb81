"""/api/runs/{run}/metrics/keys says what each key is: canonical name, role and unit."""

from __future__ import annotations

from typing import Any

import httpx

from runwatch.server.runner import Runner
from tests.support import MakeRun, wait_for


def test_keys_carry_canonical_name_role_and_unit(server: Runner, make_run: MakeRun) -> None:
    make_run("hf", steps=3, metrics=lambda i: {
        "train/loss": 1.0, "eval_loss": 2.0, "timing/step_total_s": 0.5,
        "env/all/by_group/frac_mixed": 0.25, "my/own": 1.0})

    def keys() -> dict[str, dict[str, Any]]:
        resp = httpx.get(f"{server.url}/api/runs/hf/metrics/keys", timeout=30)
        if resp.status_code != 200:
            return {}
        found = {k["key"]: k for k in resp.json()["keys"]}
        return found if len(found) == 5 and all(k["count"] == 3 for k in found.values()) else {}

    got = wait_for(keys, what="the run's 5 keys indexed, 3 points each")
    described = {k: (v["canonical"], v["role"], v["unit"]) for k, v in got.items()}
    assert described == {
        "train/loss": ("loss", "train_loss", "nats/token"),
        "eval_loss": ("val/loss", "eval_loss", "nats/token"),
        "timing/step_total_s": ("timing/step_total_s", "step_time", "s"),
        # tinker-cookbook's complement: it stands for the metric, but plays no role as is.
        "env/all/by_group/frac_mixed": ("zero_variance_skip_ratio", None, "fraction"),
        "my/own": ("my/own", None, None),
    }
