"""The web app's API types (web/src/types.ts) against what a real server sends.

The real server runs over HTTP on runs written by the SDK; for each interface in
types.ts, a real response of the route (or event of the run's stream: points, log,
phase) it describes must have every declared field (optional ones, marked `?`, may be
absent) and no field the interface does not declare.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import httpx

from runwatch.rundir.format import typescript
from runwatch.sdk import init
from runwatch.server.runner import Runner
from tests.support import wait_for

TYPES = Path(__file__).resolve().parents[2] / "web" / "src" / "types.ts"


def interfaces(text: str) -> dict[str, dict[str, bool]]:
    """Each `export interface Name { … }` in `text`: its top-level fields and whether each
    is required (no `?`). Fields of inline object types are not descended into."""
    out: dict[str, dict[str, bool]] = {}
    for m in re.finditer(r"export interface (\w+) \{", text):
        depth, i, body_start = 1, m.end(), m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        body = text[body_start:i - 1]
        fields: dict[str, bool] = {}
        level = 0
        for line in body.splitlines():
            if level == 0:
                fm = re.match(r"\s*(\w+)(\??):", line)
                if fm:
                    fields[fm.group(1)] = fm.group(2) != "?"
            level += line.count("{") - line.count("}")
        out[m.group(1)] = fields
    return out


def test_the_parser_reads_fields_and_optionals() -> None:
    parsed = interfaces("export interface A {\n  x: number;\n  y?: { z: string };\n"
                        "  w: string;\n}\n")
    assert parsed == {"A": {"x": True, "y": False, "w": True}}


def _runs(runs_dir: Path) -> None:
    run = init(name="typed", dir=runs_dir, method="grpo", base_model="tiny", dataset="arith",
               trainer="t", backend="local", config={"gradient_accumulation_steps": 2})
    for i in range(12):
        run.log({"loss": 1.0 / (i + 1), "reward_mean": i / 12, "trained_tokens": 10.0,
                 "grad_norm": math.nan if i >= 6 else 1.0}, step=i)
    run.log_samples(3, [{"prompt": "p", "completion": "c", "reward": 1.0,
                         "reward_terms": {"ok": 1.0}}], split="train")
    run.log_text("hello", level="warning", data={"k": 1})
    run.log_checkpoint(step=11, kind="training", id="c-11", path="/tmp/c")
    run.finish("SUCCEEDED")


def test_types_match_the_responses_of_a_real_server(server: Runner, runs_dir: Path) -> None:
    _runs(runs_dir)
    declared = interfaces(TYPES.read_text())
    with httpx.Client(base_url=server.url, timeout=30) as client:

        def get(path: str, **params: Any) -> Any:
            resp = client.get(path, params=params)
            assert resp.status_code == 200, resp.text
            return resp.json()

        def ready() -> bool:
            r = client.get("/api/runs/typed/health")
            return r.status_code == 200 and bool(r.json()["findings"]) and bool(
                client.get("/api/runs/typed/samples").json()["available"])

        wait_for(ready, what="the run indexed with its samples and a health finding")
        detail = get("/api/runs/typed")
        run_list = get("/api/runs")
        keys = get("/api/runs/typed/metrics/keys")
        series = get("/api/series", run="typed", key="loss", points=10)
        logs = get("/api/runs/typed/logs")
        samples = get("/api/runs/typed/samples")
        health = get("/api/runs/typed/health")
        events = _stream_events(client, "/api/runs/typed/stream", {"points", "log", "phase"})
        sent: dict[str, Any] = {
            "RunList": run_list, "RunSummary": run_list["runs"][0], "RunDetail": detail,
            "Scalars": detail["scalars"], "Actions": detail["actions"],
            "RunState": detail["state"], "Cost": detail["cost"],
            "Checkpoint": detail["checkpoints"][0],
            "Settings": detail["settings"], "MetricKeys": keys, "MetricKey": keys["keys"][0],
            "SeriesResponse": series, "SeriesData": series["series"][0],
            "HistoryPage": get("/api/runs/typed/history"),
            "LogPage": logs, "LogEntry": logs["logs"][0],
            "SamplesResponse": samples, "Sample": samples["samples"][0],
            "HealthResponse": health, "Finding": health["findings"][0],
            "PointsEvent": events["points"][0], "LogEntry (stream)": events["log"],
            "RunSummary (stream)": events["phase"],
        }
    assert {name.split(" ")[0] for name in sent} == set(declared), "every interface is checked"
    for name, body in sent.items():
        fields = declared[name.split(" ")[0]]
        missing = {f for f, required in fields.items() if required and f not in body}
        undeclared = set(body) - set(fields)
        assert not missing and not undeclared, (
            f"{name}: declared but not sent {sorted(missing)}, sent but not declared "
            f"{sorted(undeclared)}")


def test_the_generated_log_levels_are_current() -> None:
    assert (TYPES.parent / "format.gen.ts").read_text() == typescript(), (
        "web/src/format.gen.ts is stale: write typescript() of runwatch.rundir.format to it")


def _stream_events(client: httpx.Client, path: str, wanted: set[str]) -> dict[str, Any]:
    """The data of the first event of each wanted kind of a run's stream, read from its
    first record on (each read waits at most the client's timeout)."""
    found: dict[str, Any] = {}
    event = ""
    with client.stream("GET", path, params={"cursor": "-1.-1.-1.-1"}) as resp:
        for line in resp.iter_lines():
            if line.startswith("event:"):
                event = line.partition(":")[2].strip()
            elif line.startswith("data:") and event in wanted and event not in found:
                found[event] = json.loads(line.partition(":")[2])
                if set(found) == wanted:
                    break
    return found
