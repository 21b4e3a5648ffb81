"""The files generated from the vocabulary are current, and the web finds the same keys.

docs/metrics.md and web/src/metrics.gen.ts must equal what their generators write now;
the web's `findKey` (chartspecs.ts over metrics.gen.ts, bundled with esbuild and run in
Node) must pick the same key as `runwatch.metrics.find_key` for every role.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runwatch.metrics import Role, find_key, typescript
from runwatch.metrics import docs as metric_docs
from runwatch.metrics.aliases import EXACT, SHOWN

REPO = Path(__file__).resolve().parents[2]
ESBUILD = REPO / "web" / "node_modules" / ".bin" / "esbuild"


def test_docs_page_is_current() -> None:
    page = (REPO / "docs" / "metrics.md").read_text(encoding="utf-8")
    assert page == metric_docs.render(), "docs/metrics.md is stale: run " \
        "python -m runwatch.metrics.docs"


def test_web_module_is_current() -> None:
    module = (REPO / "web" / "src" / "metrics.gen.ts").read_text(encoding="utf-8")
    assert module == typescript.render(), "web/src/metrics.gen.ts is stale: run " \
        "python -m runwatch.metrics.typescript"


def _key_sets() -> list[list[str]]:
    """Runs' key sets that exercise every rule: canonical names, each alias alone, the
    prefixed forms, patterns, a transformed alias, and names an object has built in."""
    canonical = ["loss", "val/loss", "accuracy", "reward_mean", "learning_rate", "grad_norm"]
    sets = [canonical, ["train/loss", "eval/loss", "train/learning_rate", "train_loss"],
            ["val-core/gsm8k/acc/mean@1", "val/test_score/math", "eval_x_pass1"],
            ["env/all/by_group/frac_mixed", "constructor", "toString", "__proto__"],
            ["reward", "train/reward_mean", "critic/rewards/mean"],
            ["policy_state/trainer_step", "eval/rewards/accuracies", "train/actor/grad_norm"],
            ["eval_loss", "val_loss", "eval/loss"], []]
    sets += [[name] for name in (*EXACT, *SHOWN)]
    sets += [[f"train/{name}"] for name in EXACT]
    return sets


def test_the_web_finds_the_same_key_for_each_role(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None or not ESBUILD.exists():
        pytest.fail("this test needs Node and the web's packages: cd web && npm ci")
    entry = tmp_path / "entry.ts"
    entry.write_text(
        f'import {{ findKey }} from {json.dumps(str(REPO / "web" / "src" / "chartspecs.ts"))};\n'
        'import { readFileSync } from "node:fs";\n'
        'const { sets, roles } = JSON.parse(readFileSync(0, "utf-8"));\n'
        'const out = sets.map((s: string[]) => roles.map((r: any) => '
        'findKey(new Set(s), r) ?? null));\n'
        'process.stdout.write(JSON.stringify(out));\n', encoding="utf-8")
    bundle = tmp_path / "entry.mjs"
    subprocess.run([str(ESBUILD), str(entry), "--bundle", "--platform=node", "--format=esm",
                    f"--outfile={bundle}", "--log-level=error"], check=True, timeout=60)
    sets, roles = _key_sets(), [r.value for r in Role]
    proc = subprocess.run([node, str(bundle)], input=json.dumps({"sets": sets, "roles": roles}),
                          capture_output=True, text=True, check=True, timeout=60)
    web = json.loads(proc.stdout)
    python = [[find_key(s, Role(r)) for r in roles] for s in sets]
    differ = [(s, r, w, p) for s, ws, ps in zip(sets, web, python, strict=True)
              for r, w, p in zip(roles, ws, ps, strict=True) if w != p]
    assert differ == []
    assert any(k is not None for row in python for k in row)


def test_a_generator_given_a_flag_writes_no_file(tmp_path: Path) -> None:
    # `python -m runwatch.health.docs --help` once wrote the page to a file named "--help".
    for flag, code in (("--help", 0), ("--out", 2)):
        done = subprocess.run([sys.executable, "-m", "runwatch.metrics.docs",
                               flag], cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == code, done.stderr
        assert "usage" in done.stderr and "docs/metrics.md" in done.stderr
        assert list(tmp_path.iterdir()) == []
