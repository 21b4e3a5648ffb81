"""`--jq` gives null for every non-finite value, as the README says: jq itself reads
Infinity as its largest float, so `--jq` printed ±1.797e308 and `runwatch import` then
kept a huge finite loss, which the health rules no longer see as non-finite (a trial)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import runwatch
from tests.support.cli import cli_here, run_cli


def test_jq_gives_null_for_nan_and_both_infinities_and_import_reads_them_as_nan(
        tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    with runwatch.init(name="inf", dir=runs) as run:
        run.log({"loss": math.inf, "neg": -math.inf, "nan": math.nan, "ok": 1.5}, step=0)
    said = run_cli("runs", "metrics", "inf", "--dir", str(runs), "--jq", ".steps[0].measured")
    assert json.loads(said.stdout) == {"loss": None, "neg": None, "nan": None, "ok": 1.5}

    # the rest in this process: what the commands answer, not the process, is read here
    export = tmp_path / "through-jq.json"
    export.write_text(cli_here("runs", "metrics", "inf", "--dir", str(runs),
                               "--jq", ".").stdout)
    cli_here("import", str(export), "--dir", str(runs), "--name", "back")
    back = cli_here("runs", "metrics", "back", "--dir", str(runs), "-o", "json").stdout
    measured = json.loads(back)["steps"][0]["measured"]
    assert all(math.isnan(measured[k]) for k in ("loss", "neg", "nan")), back
    assert measured["ok"] == 1.5
