"""A run started by hand whose process was killed (it recorded no end): `runs get` (table
and JSON), the API's run detail and `runs wait` give one verdict, the one
analysis.detail.unrecorded_end makes: it stopped before it finished, with what to do, and
its cost ended at its last record. Nothing is written into its folder."""

from __future__ import annotations

import json
from pathlib import Path

from runwatch.jobs.failures import CATALOGUE
from runwatch.server.runner import Runner
from tests.killed import killed_run
from tests.support import cli_here, http, wait_for

GONE = CATALOGUE["stopped_early"]


def _folder(run_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(run_dir.iterdir()) if p.is_file()}


def test_every_surface_gives_the_wait_s_verdict_on_a_killed_hand_run(
        runs_dir: Path, server: Runner) -> None:
    killed_run(runs_dir, "killed")
    here = ("--dir", str(runs_dir))
    recorded = _folder(runs_dir / "killed")

    shown = json.loads(cli_here("runs", "get", "killed", *here, "-o", "json").stdout)
    failure = shown["failure"]
    assert failure == {"code": "stopped_early", "reason": GONE.sentence,
                       "what_to_do": GONE.advice(False)}
    # advice a run started by hand can follow: runwatch cannot start it again
    assert "Run its command again" in failure["what_to_do"]
    assert failure["what_to_do"] != GONE.what_to_do
    assert (shown["state"]["phase"], shown["state"]["process_gone"]) == ("RUNNING", True)
    # its cost ended at its last record: final figures, not an estimate that grows
    cost = shown["cost"]
    assert cost["device_seconds_estimate"] is False
    (attempt,) = shown["attempts"]
    assert attempt["ended"] is True and attempt["ended_at"] == shown["state"]["updated_at"]
    assert (attempt["reason"], attempt["reason_code"]) == (GONE.sentence, GONE.id)
    assert cost["device_seconds"] == attempt["device_seconds"] == \
        shown["timing"]["phaseMillis"]["RUNNING"] / 1000

    table = " ".join(cli_here("runs", "get", "killed", *here).stdout.split())  # unwrapped
    assert f"Reason: {GONE.sentence} [{GONE.id}]" in table
    assert f"What to do: {GONE.advice(False)}" in table
    assert "estimate" not in table

    waited = cli_here("runs", "wait", "killed", *here, "-o", "json", "--exit-status",
                      check=False)
    assert waited.returncode == 1, waited.stdout
    *_, end, record = (json.loads(ln) for ln in waited.stdout.splitlines())
    # a script reading the stream sees the run end, and that no process recorded the end
    assert (end["phase"], end["recorded"], end["process_gone"]) == ("FAILED", False, True)
    assert (end["code"], end["reason"]) == (failure["code"], failure["reason"])
    assert record["failure"] == failure and record["cost"] == cost
    said = cli_here("runs", "wait", "killed", *here, check=False).stdout
    assert f"the training process is gone: {GONE.sentence}" in said
    assert f"what to do: {failure['what_to_do']}" in said

    with http.client(base_url=server.url, timeout=30) as client:
        wait_for(lambda: client.get("/api/runs/killed").json()["state"]["process_gone"],
                 what="the server to find the run's process gone")
        detail = client.get("/api/runs/killed").json()
    assert detail["failure"] == failure
    assert detail["cost"]["device_seconds_estimate"] is False
    assert detail["cost"]["device_seconds"] == cost["device_seconds"]
    assert detail["attempts"] == shown["attempts"]

    # every verdict is the readers' own: the run's folder is as its process left it
    assert _folder(runs_dir / "killed") == recorded
