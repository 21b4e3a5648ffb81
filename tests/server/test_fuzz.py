"""A fuzz run of the whole API from its OpenAPI schema (schemathesis): no input gets a 5xx,
and every 4xx is the one error shape.

The app runs in-process over a real SQLite index holding a few real runs and a worker;
requests are generated from `/openapi.json`, valid ones and invalid ones, with the run,
key and worker parameters often pointing at what the index holds (the write routes
included: a generated job is submitted for real, and no worker runs it). A live stream
of a real run stays open, so the stream routes are fuzzed with generated run names only
(tests/server/test_sse.py covers real streams). Failures are collected rather than
raised, so one run lists every 5xx at once (without Hypothesis shrinking each one).
"""

from __future__ import annotations

import copy
import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.core import NotSet
from schemathesis.core.result import Err, Ok
from sqlalchemy import Engine

from runwatch.rundir import format as fmt
from runwatch.server.app import create_app
from runwatch.store import jobs as store_jobs

from .apiclient import Api, MakeRun

pytestmark = pytest.mark.slow
# examples per operation and generation mode: some 330 cases in all
EXAMPLES = 13
# ingest bodies the property test sends (Hypothesis's default count)
BODIES = 100
RUNS = ["fz-sft", "fz-nan", "fz-failed"]
KEYS = ["loss", "learning_rate", "reward"]
WORKER = "fz-worker"
JSON = "application/json"
T = TypeVar("T")


def _index_runs(make_run: MakeRun, index: Callable[[], None]) -> None:
    make_run("fz-sft", steps=30)
    make_run("fz-nan", steps=10,
             metrics=lambda i: {"loss": math.nan if i == 4 else 1.0 / (i + 1), "reward": i})
    make_run("fz-failed", steps=3, status="FAILED")
    index()


def _ok(result: Ok[T] | Err[Any]) -> T:
    """The value of a schemathesis result that must have succeeded."""
    assert isinstance(result, Ok), result.err()
    return result.ok()


def _aim(case: Any, data: st.DataObject) -> None:
    """Point the run and key parameters at real runs and keys about half of the time."""
    real = st.booleans()
    if case.path_parameters and "run" in case.path_parameters and data.draw(real):
        case.path_parameters["run"] = data.draw(st.sampled_from(RUNS))
    if case.path_parameters and "worker" in case.path_parameters and data.draw(real):
        case.path_parameters["worker"] = WORKER
    query = case.query if isinstance(case.query, dict) else None
    if query is not None:
        if "run" in query and data.draw(real):
            query["run"] = data.draw(st.lists(st.sampled_from(RUNS), min_size=1, max_size=2))
        if "key" in query and data.draw(real):
            query["key"] = data.draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=2))


def _problem(status: int, body: Any) -> str | None:
    if status >= 500:
        return f"{status}"
    if status >= 400 and not (isinstance(body, dict) and body.get("ok") is False
                              and isinstance(body.get("error"), str) and body["error"]
                              and body.get("status") == status):
        return f"{status} without the error shape"
    return None


def _copy(request: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of a case's request, but for schemathesis's one NOT_SET (no body), which
    a copy would not be."""
    return {k: v if isinstance(v, NotSet) else copy.deepcopy(v) for k, v in request.items()}


def _request(case: Any) -> dict[str, Any]:
    """What a case sends, to make the same case again on another store's app."""
    return _copy({"method": case.method, "path_parameters": case.path_parameters,
                  "headers": case.headers, "cookies": case.cookies, "query": case.query,
                  "body": case.body, "media_type": case.media_type})


@pytest.fixture(scope="module")
def generated() -> dict[str, list[dict[str, Any]]]:
    """The whole-API fuzz's cases by operation and mode, as the first store's test made
    them. Derandomized, Hypothesis makes the same cases on every store, so the next
    stores' tests send these again instead of making them anew (making them is about two
    thirds of the fuzz's time)."""
    return {}


def test_fuzz_the_whole_api_finds_no_5xx(engine: Engine, runs_dir: Path, make_run: MakeRun,
                                         index: Callable[[], None],
                                         generated: dict[str, list[dict[str, Any]]]) -> None:
    _index_runs(make_run, index)
    with engine.begin() as conn:
        store_jobs.register_worker(conn, store_jobs.WorkerRow(WORKER, "fz-host", 1, 1, "cpu",
                                                               time.time()))
    app = create_app(engine, runs_dir=runs_dir, poll_interval=0.01)
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    schema.config.max_stream_events = 1  # a stream answers one event, then is closed
    operations = [_ok(result) for result in schema.get_all_operations()]
    assert len(operations) >= 22
    ran: list[str] = []
    failures: list[str] = []
    requests: list[dict[str, Any]] = []  # the cases of the operation and mode being made

    def send(case: Any) -> None:
        ran.append(case.operation.label)
        try:
            resp = case.call()
        except Exception as exc:  # the app raised: the client saw a 500
            failures.append(f"{case.operation.label} raised {exc!r}: "
                            f"{case.as_curl_command()}")
            return
        try:
            body = resp.json()
        except ValueError:
            body = None
        problem = _problem(resp.status_code, body)
        if problem:
            failures.append(f"{case.operation.label} answered {problem} {str(body)[:300]}: "
                            f"{case.as_curl_command()}")

    for op in operations:
        # a path holds only strings, so an operation with no query and no body has no
        # invalid input to generate beyond the strings its valid input already has
        has_input = len(op.query) > 0 or len(op.body) > 0
        modes = [GenerationMode.POSITIVE] + ([GenerationMode.NEGATIVE] if has_input else [])
        for mode in modes:
            made = f"{op.label} {mode.value}"
            if made in generated:
                for request in generated[made]:
                    send(op.Case(**_copy(request)))
                continue

            @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                      phases=[Phase.generate], suppress_health_check=list(HealthCheck))
            @given(case=op.as_strategy(generation_mode=mode), data=st.data())
            def fuzz(case: Any, data: st.DataObject) -> None:
                if not case.operation.path.endswith("/stream"):  # a real run's stream stays open
                    _aim(case, data)
                requests.append(_request(case))
                send(case)

            fuzz()
            generated[made] = requests.copy()
            requests.clear()

    print(f"fuzzed {len(ran)} cases over {len(operations)} operations; "
          f"{len(failures)} failures")
    assert not failures, "\n".join(sorted(set(failures))[:40])


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70)
    | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=3),
    max_leaves=8)
MANIFEST_FIELDS = ["name", "project", "group", "tags", "method", "base_model", "created_at",
                   "schema_version", "config", "host", "git"]


@st.composite
def ingest_bodies(draw: st.DrawFn) -> bytes:
    """A batch whose records and manifest hold any JSON values (NaN, huge ints, nesting)."""
    run_id = draw(st.sampled_from(["fz-new", *RUNS]))
    fields = draw(st.dictionaries(st.sampled_from(MANIFEST_FIELDS), JSON_VALUES, max_size=4))
    manifest = {"schema_version": 1, "run_id": run_id, "name": run_id,
                "created_at": 1.7e9, **fields}
    records = draw(st.lists(st.fixed_dictionaries(
        {"seq": st.integers(min_value=0, max_value=2**40), "step": JSON_VALUES,
         "ts": JSON_VALUES},
        optional={k: JSON_VALUES for k in ("loss", "reward", "phase", "level", "message")}),
        max_size=4))
    batch: dict[str, Any] = {"run_id": run_id, "file": draw(st.sampled_from(fmt.FILES)),
                             "records": records}
    if draw(st.booleans()):
        batch["manifest"] = manifest
    return json.dumps(batch).encode()


@pytest.fixture(scope="module")
def bodies() -> list[bytes]:
    """The ingest fuzz's bodies, as the first store's test made them; the next stores'
    tests send these again (derandomized, Hypothesis would make the same ones)."""
    return []


def test_fuzz_ingest_with_any_json_values_finds_no_5xx(
        engine: Engine, runs_dir: Path, make_run: MakeRun, index: Callable[[], None],
        bodies: list[bytes]) -> None:
    _index_runs(make_run, index)
    api = Api(create_app(engine, runs_dir=runs_dir))
    failures: list[str] = []

    def send(body: bytes) -> None:
        try:
            resp = api.post("/api/ingest", content=body, headers={"Content-Type": JSON})
        except Exception as exc:  # the app raised: the client saw a 500
            failures.append(f"raised {exc!r}: {body[:400]!r}")
            return
        problem = _problem(resp.status_code, resp.json())
        if problem:
            failures.append(f"answered {problem} {resp.text[:300]}: {body[:400]!r}")

    if bodies:
        for body in bodies:
            send(body)
    else:
        @settings(max_examples=BODIES, deadline=None, database=None, derandomize=True,
                  phases=[Phase.generate], suppress_health_check=list(HealthCheck))
        @given(body=ingest_bodies())
        def fuzz(body: bytes) -> None:
            bodies.append(body)
            send(body)

        fuzz()
    print(f"fuzzed /api/ingest with {len(bodies)} bodies; {len(failures)} failures")
    assert not failures, "\n".join(failures[:20])
