"""The JSON bodies the API's read routes send, as models for the OpenAPI schema only.

The routes attach these with `responses={200: {"model": ...}}`, never `response_model`,
so nothing is validated or filtered at run time: a large series answer stays as fast as
before and NaN passes through as the JSON encoder writes it. Each model mirrors the
interface of the same name in `web/src/types.ts` (tests/web/test_types.py checks both
against each other and against what a real server sends). Times in run summaries are
ISO 8601 text; times in a run's state and in findings are Unix seconds.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from runwatch.server import jsonio


def documented(model: type[BaseModel], description: str) -> dict[str, Any]:
    """A read route's decorator arguments that describe its 200 body as `model` in the
    OpenAPI schema; the route's return value goes to the client as it is (no
    `response_model`: nothing is validated, filtered or converted on the way)."""
    return {"response_model": None, "response_class": jsonio.JSONResponse,
            "responses": {200: {"model": model, "description": description}}}


class RunLabels(BaseModel):
    """What a run says of itself: the fields its summary and its state share."""

    project: str | None
    group: str | None
    tags: list[str]
    method: str | None
    base_model: str | None
    dataset: str | None
    trainer: str | None
    backend: str | None


class RunSummary(RunLabels):
    """A run's list fields: what the run list, the CLI's table and the streams carry."""

    run_id: str
    name: str
    status: str
    process_gone: bool = Field(description="the run has not ended but its process is gone")
    stage: str | None
    reason: str | None
    created_at: str | None
    started_at: str | None
    ended_at: str | None
    duration_s: float | None
    observed_step: int | None
    saved_step: int | None


class RunList(BaseModel):
    ok: bool
    runs: list[RunSummary]
    next_cursor: str | None


class Scalars(BaseModel):
    """The run's tiles."""

    steps: int | None
    examples: float | None
    tokens: float | None
    grad_accum: float | None
    best_train_loss: float | None
    latest_train_loss: float | None
    eval_loss: float | None
    mean_reward: float | None


class Actions(BaseModel):
    """What the run's phase allows."""

    cancel: bool
    retry: bool


class Progress(BaseModel):
    done: int | None
    total: int


class RunState(RunLabels):
    """The run's state; times are Unix seconds."""

    phase: str
    stage: str | None
    progress: Progress | None
    observed_step: int | None
    saved_step: int | None
    reason: str | None
    process_gone: bool
    created_at: float | None
    started_at: float | None
    ended_at: float | None
    updated_at: float | None


class Timing(BaseModel):
    phaseMillis: dict[str, float]


class Cost(BaseModel):
    duration_s: float | None
    timing: Timing
    device_seconds: float
    device_seconds_estimate: bool
    last_step_time_s: float | None
    peak_memory_bytes: dict[str, float | None]


class Checkpoint(BaseModel):
    seq: int
    ts: str | None
    step: int | None
    kind: str | None
    id: str | None
    path: str | None
    extra: dict[str, Any]


class CheckpointList(BaseModel):
    ok: bool
    checkpoints: list[Checkpoint]


class Settings(BaseModel):
    config: Any
    config_text: str | None
    engine_config: Any


class RunDetail(BaseModel):
    ok: bool
    run_id: str
    name: str
    run: RunSummary
    summary: str
    state: RunState
    results: dict[str, float | str | None]
    cost: Cost
    scalars: Scalars
    actions: Actions
    checkpoints: list[Checkpoint]
    metrics: list[str]
    manifest: dict[str, Any]
    problems: list[str]
    dir: str | None
    settings: Settings
    cursor: str = Field(description="where the run's live stream starts")


class MetricKey(BaseModel):
    key: str
    count: int
    last_step: int | None
    last_value: float | None
    canonical: str | None
    role: str | None
    unit: str | None


class MetricKeys(BaseModel):
    ok: bool
    cursor: str
    keys: list[MetricKey]


class SeriesData(BaseModel):
    """One run's series of one key; `min` and `max` only when it was downsampled."""

    run: str
    key: str
    full: bool
    count: int
    step: list[int]
    value: list[float | None]
    min: list[float | None] = Field(default_factory=list)
    max: list[float | None] = Field(default_factory=list)


class Edges(BaseModel):
    lo: float
    hi: float
    buckets: int
    width: float


class SeriesResponse(BaseModel):
    ok: bool
    edges: Edges
    series: list[SeriesData]


class HistoryRow(BaseModel):
    step: int
    values: dict[str, float | None]


class HistoryPage(BaseModel):
    ok: bool
    columns: list[str]
    rows: list[HistoryRow]
    total: int
    next_cursor: str | None
    prev_cursor: str | None


class LogEntry(BaseModel):
    seq: int
    ts: str | None
    level: str
    message: str
    data: Any


class LogPage(BaseModel):
    ok: bool
    logs: list[LogEntry]
    next_cursor: str | None


class Sample(BaseModel):
    index: int
    prompt: Any
    completion: Any
    reward: float | None
    reward_terms: dict[str, float | None]
    advantage: float | None
    group: Any
    truncated: bool | None
    tokens: dict[str, float | None]
    data: dict[str, Any]


class SampleStep(BaseModel):
    step: int
    split: str
    count: int


class SamplesResponse(BaseModel):
    ok: bool
    available: list[SampleStep]
    step: int | None
    split: str | None
    total: int
    samples: list[Sample]


class Finding(BaseModel):
    id: int | None
    rule_id: str
    title: str
    severity: str
    status: str
    metric: str | None
    first_step: int | None
    last_step: int | None
    evidence: dict[str, Any]
    message: str
    advice: str
    metrics: list[str] = Field(description="the finding's metric first, then the others "
                               "its rule reads")
    opened_ts: float | None
    updated_ts: float | None


class HealthResponse(BaseModel):
    ok: bool
    available: bool
    findings: list[Finding]
    resolved: int


class PointsEvent(BaseModel):
    """One record of a `points` event of a run's stream (the event's data is a list).

    The stream routes' OpenAPI entries cannot say what their events carry, so no route
    names this model; tests/web/test_types.py checks the web's type against it directly.
    """

    seq: int
    step: int
    values: dict[str, float | None]

