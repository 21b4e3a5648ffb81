"""The web app's API types (web/src/types.ts) against what a real server sends.

The real server runs over HTTP, with an embedded worker, on runs written by the SDK and
jobs submitted through the API; for each interface in types.ts, a real response of the
route (or event of the run's stream: points, log, phase) it describes must have every
declared field (optional ones, marked `?`, may be absent) and no field the interface
does not declare.

Each interface must also match the component schema of the same name in the server's
`/openapi.json` (runwatch.server.schemas): the same fields, the same required ones, and
each field of the same kind (number, string, boolean, array, object, unknown, or a named
type; null-able or not). So what the server sends, the web's types and the OpenAPI schema
are checked against each other.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import httpx
import pytest
from sqlalchemy import Engine

from runwatch.rundir.format import typescript
from runwatch.sdk import init
from runwatch.server.runner import Runner, free_port
from runwatch.server.schemas import PointsEvent
from tests.support import http, wait_for

TYPES = Path(__file__).resolve().parents[2] / "web" / "src" / "types.ts"
# the models of stream events (no route of /openapi.json names them)
STREAM_ONLY = {"PointsEvent": PointsEvent}


@pytest.fixture
def server(engine: Engine, runs_dir: Path) -> Iterator[Runner]:
    """The real server with one embedded worker (as `runwatch ui`), so the job routes have
    a worker and a running job to show."""
    with Runner(engine, runs_dir=runs_dir, port=free_port(), interval=0.05, workers=1,
                worker_settings={"heartbeat_s": 0.5, "grace_s": 2.0}, warm=False) as srv:
        yield srv


class TsField(NamedTuple):
    """One field of an interface: whether it is required (no `?`) and its type's text."""

    required: bool
    type: str


def interfaces(text: str) -> dict[str, dict[str, TsField]]:
    """Each `export interface Name { … }` in `text`: its top-level fields. Fields of
    inline object types are not descended into."""
    text = re.sub(r"/\*.*?\*/|//[^\n]*", "", text, flags=re.S)
    out: dict[str, dict[str, TsField]] = {}
    for m in re.finditer(r"export interface (\w+) \{", text):
        depth, i, body_start = 1, m.end(), m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        fields: dict[str, TsField] = {}
        for member in _split(text[body_start:i - 1], ";"):
            fm = re.fullmatch(r"\s*(\w+)(\??):\s*(.*?)\s*", member, flags=re.S)
            if fm:
                fields[fm.group(1)] = TsField(fm.group(2) != "?", fm.group(3))
        out[m.group(1)] = fields
    return out


def _split(text: str, sep: str) -> list[str]:
    """`text` split at each `sep` outside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"{": 1, "(": 1, "<": 1, "[": 1, "}": -1, ")": -1, ">": -1, "]": -1}.get(ch, 0)
        if ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return [*parts, text[start:]]


def ts_kinds(type_text: str) -> set[str]:
    """The kinds a TypeScript type allows: number, string, boolean, array, object,
    unknown, null, or the name of an interface."""
    kinds: set[str] = set()
    for alt in (a.strip() for a in _split(type_text, "|")):
        if alt.endswith("[]"):
            kinds.add("array")
        elif alt.startswith(("{", "Record<")):
            kinds.add("object")
        elif alt.startswith("(") and alt.endswith(")"):
            kinds |= ts_kinds(alt[1:-1])
        else:
            kinds.add(alt)
    return kinds


def schema_kinds(schema: dict[str, Any], named: Collection[str] = ()) -> set[str]:
    """The same kinds for a JSON schema of OpenAPI (an integer is a number); a reference
    to a component is its name when `named` holds it (an interface), else an object."""
    if "$ref" in schema:
        ref = schema["$ref"].rsplit("/", 1)[1]
        return {ref if ref in named else "object"}
    if "anyOf" in schema:
        return set().union(*(schema_kinds(s, named) for s in schema["anyOf"]))
    kind = schema.get("type", "unknown")
    return {"number" if kind == "integer" else kind}


def schema_problems(name: str, fields: dict[str, TsField], schema: dict[str, Any],
                    components: dict[str, Any], named: Collection[str]) -> list[str]:
    """How the interface `name` of types.ts differs from its component schema; an
    inline object type is compared with the component its field refers to."""
    props = schema.get("properties", {})
    required = set(schema.get("required", []))
    problems = [f"{name}.{f}: in types.ts, not in the schema" for f in set(fields) - set(props)]
    problems += [f"{name}.{f}: in the schema, not in types.ts" for f in set(props) - set(fields)]
    for f in set(fields) & set(props):
        if fields[f].required != (f in required):
            problems.append(f"{name}.{f}: required in one and optional in the other")
        ts, api = ts_kinds(fields[f].type), schema_kinds(props[f], named)
        if ts != api:
            problems.append(f"{name}.{f}: {fields[f].type} in types.ts, {sorted(api)} "
                            "in the schema")
        inline = [a for a in _split(fields[f].type, "|") if a.strip().startswith("{")]
        refs = [s["$ref"] for s in props[f].get("anyOf", [props[f]]) if "$ref" in s]
        if inline and refs:
            inner = interfaces(f"export interface X {inline[0]}")["X"]
            problems += schema_problems(f"{name}.{f}", inner,
                                        components[refs[0].rsplit("/", 1)[1]],
                                        components, named)
    return problems


def test_the_parser_reads_fields_optionals_and_kinds() -> None:
    parsed = interfaces("export interface A {\n  /** x. */\n  x: number;\n"
                        "  y?: { z: string; v: number };\n  w: (number | null)[];\n}\n")
    assert parsed == {"A": {"x": TsField(True, "number"),
                            "y": TsField(False, "{ z: string; v: number }"),
                            "w": TsField(True, "(number | null)[]")}}
    assert ts_kinds("Record<string, number | null> | null") == {"object", "null"}
    assert ts_kinds("RunSummary") == {"RunSummary"}
    assert schema_kinds({"anyOf": [{"type": "integer"}, {"type": "null"}]}) == {"number", "null"}
    assert schema_kinds({"$ref": "#/components/schemas/Edges"}, named={"RunSummary"}) == {
        "object"}
    assert schema_kinds({}) == {"unknown"}


def test_a_schema_that_differs_from_types_ts_is_reported() -> None:
    fields = {"a": TsField(True, "number | null"), "b": TsField(False, "string[]"),
              "c": TsField(True, "boolean"), "e": TsField(True, "{ x: number } | null")}
    schema = {"properties": {"a": {"type": "integer"}, "b": {"type": "array"},
                             "d": {"type": "string"},
                             "e": {"anyOf": [{"$ref": "#/components/schemas/E"},
                                             {"type": "null"}]}},
              "required": ["a", "b", "e"]}
    components = {"E": {"properties": {"x": {"type": "string"}}, "required": ["x"]}}
    assert sorted(schema_problems("T", fields, schema, components, {"T"})) == [
        "T.a: number | null in types.ts, ['number'] in the schema",
        "T.b: required in one and optional in the other",
        "T.c: in types.ts, not in the schema",
        "T.d: in the schema, not in types.ts",
        "T.e.x: number in types.ts, ['string'] in the schema",
    ]


def test_types_match_the_openapi_schema(server: Runner) -> None:
    declared = interfaces(TYPES.read_text())
    spec = http.get(f"{server.url}/openapi.json", timeout=30).json()
    components: dict[str, Any] = spec["components"]["schemas"]
    # a stream's OpenAPI entry cannot say what its events carry: their models are read here
    components.update({name: model.model_json_schema(ref_template="#/components/schemas/"
                                                     "{model}")
                       for name, model in STREAM_ONLY.items()})
    assert set(declared) <= set(components), (
        f"no component schema for {sorted(set(declared) - set(components))}")
    problems = [p for name, fields in declared.items()
                for p in schema_problems(name, fields, components[name], components,
                                         set(declared))]
    assert not problems, "\n".join(sorted(problems))


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
    for name in ("cmp-a", "cmp-b"):  # two SFT runs of one plan, for GET /api/compare
        sft = init(name=name, dir=runs_dir, method="sft", config={"seed": 1})
        for i in range(5):
            sft.log({"loss": 1.0 / (i + 1)}, step=i)
        sft.finish("SUCCEEDED")
    # started from cmp-a's folder: a pipeline of two stages, for Cost.pipeline
    child = init(name="cmp-child", dir=runs_dir, method="dpo",
                 base_model=f"init_from:{runs_dir / 'cmp-a'}")
    child.log({"loss": 0.5}, step=0)
    child.finish("SUCCEEDED")


def test_types_match_the_responses_of_a_real_server(server: Runner, runs_dir: Path) -> None:
    _runs(runs_dir)
    declared = interfaces(TYPES.read_text())
    with http.client(base_url=server.url, timeout=30) as client:

        def get(path: str, **params: Any) -> Any:
            resp = client.get(path, params=params)
            assert resp.status_code == 200, resp.text
            return resp.json()

        def post(path: str, **body: Any) -> Any:
            resp = client.post(path, json=body)
            assert resp.status_code in (200, 201), resp.text
            return resp.json()

        # one job runs on the worker's one device; the other waits, and is cancelled
        sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
        submitted = post("/api/jobs", kind="command", name="sleeps", argv=sleeper)
        post("/api/jobs", kind="command", name="waits", argv=sleeper)
        workers = wait_for(lambda: (w := get("/api/workers"))["workers"][0]["jobs"] and w,
                           what="the worker to run a job")
        cancelled = post("/api/runs/waits/cancel")
        job = get("/api/runs/waits")
        assert job["failure"] is not None, "a cancelled job's detail has a failure"
        recipes = get("/api/recipes")
        drained = post(f"/api/workers/{workers['workers'][0]['id']}/drain")

        def ready() -> bool:
            r = client.get("/api/runs/typed/health")
            return r.status_code == 200 and bool(r.json()["findings"]) and bool(
                client.get("/api/runs/typed/samples").json()["available"]) and all(
                (c := client.get(f"/api/runs/{name}")).status_code == 200
                and c.json()["run"]["observed_step"] == 4 for name in ("cmp-a", "cmp-b"))

        wait_for(ready, what="the runs indexed: typed with its samples and a health finding, "
                 "cmp-a and cmp-b to step 4")
        detail = get("/api/runs/typed")
        def child_pipeline() -> Any:
            c = client.get("/api/runs/cmp-child")
            return c.status_code == 200 and c.json()["cost"]["pipeline"]

        pipeline = wait_for(child_pipeline, what="cmp-child's pipeline")
        run_list = get("/api/runs")
        keys = get("/api/runs/typed/metrics/keys")
        series = get("/api/series", run="typed", key="loss", points=10)
        overlay = get("/api/overlay", run=["typed", "no-such-run"], role="train_loss", points=10)
        logs = get("/api/runs/typed/logs")
        samples = get("/api/runs/typed/samples")
        health = get("/api/runs/typed/health")
        events = _stream_events(client, "/api/runs/typed/stream", {"points", "log", "phase"})
        sent: dict[str, Any] = {
            "RunList": run_list, "RunSummary": run_list["runs"][0], "RunDetail": detail,
            "ServerInfo": get("/api/server"),
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
            "ActionAnswer": submitted, "ActionAnswer (cancel)": cancelled,
            "JobSpec": job["job"], "Failure": job["failure"], "Attempt": job["attempts"][0],
            "RecipeList": recipes, "Recipe": recipes["recipes"][0],
            "RecipeSetting": recipes["recipes"][0]["settings"][0],
            "DeviceProfileInfo": recipes["device_profiles"][0],
            "WorkerList": workers, "Worker": workers["workers"][0],
            "WorkerJob": workers["workers"][0]["jobs"][0], "WorkerAnswer": drained,
            "CompareReport": get("/api/compare", run="cmp-a", baseline="cmp-b"),
            "Overlay": overlay, "OverlayRun": overlay["runs"][0],
            "OverlayMissing": overlay["missing"][0],
            "Pipeline": pipeline, "PipelineStage": pipeline["stages"][0],
        }
    assert {name.split(" ")[0] for name in sent} == set(declared), "every interface is checked"
    for name, body in sent.items():
        fields = declared[name.split(" ")[0]]
        missing = {f for f, field in fields.items() if field.required and f not in body}
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
