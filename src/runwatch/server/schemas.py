"""The JSON bodies the API sends, as models for the OpenAPI schema only.

The routes attach these with `responses={200: {"model": ...}}`, never `response_model`,
so nothing is validated or filtered at run time: a large series answer stays as fast as
before and NaN passes through as the JSON encoder writes it. Each model mirrors the
interface of the same name in `web/src/types.ts` (tests/web/test_types.py checks both
against each other and against what a real server sends). Times in run summaries are
ISO 8601 text; times in a run's state and in findings are Unix seconds.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from runwatch.server import jsonio


def documented(model: type[BaseModel], description: str, status: int = 200
               ) -> dict[str, Any]:
    """A route's decorator arguments that describe its `status` body as `model` in the
    OpenAPI schema; the route's return value goes to the client as it is (no
    `response_model`: nothing is validated, filtered or converted on the way)."""
    return {"response_model": None, "response_class": jsonio.JSONResponse,
            "responses": {status: {"model": model, "description": description}}}


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
    attempt: int = Field(description="the run's current attempt, 1 until a retry or requeue")
    reason: str | None
    reason_code: str | None = Field(description="the failure catalogue's id of `reason`")
    created_at: str | None
    started_at: str | None
    ended_at: str | None
    duration_s: float | None
    observed_step: int | None
    saved_step: int | None


class ServerInfo(BaseModel):
    """GET /api/server: what this server is, and what its indexer's last pass said of its
    runs folder as a whole."""

    ok: bool
    version: str
    auth: bool
    runs_dir: str | None
    notes: list[str] = Field(description="what the last index pass said of the runs folder "
                             "as a whole: runs kept though their folders are gone, a folder "
                             "that cannot be listed or is on another disk, a run folder that "
                             "is a copy of another's, not indexed; empty when nothing")


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
    mean_reward: float | None = Field(description="the latest mean reward")
    best_mean_reward: float | None
    reward_std: float | None = Field(description="the latest spread of reward")
    val_reward: float | None
    val_accuracy: float | None
    preference_accuracy: float | None
    margin: float | None = Field(description="the latest mean DPO margin")
    val_preference_accuracy: float | None
    val_margin: float | None
    non_finite: list[str] = Field(
        default_factory=list,
        description="the tiles above whose latest value was NaN or infinite (each sent as "
        "null, as a value never logged is)")


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
    phaseMillis: dict[str, float] = Field(description="milliseconds in each phase, summed "
                                          "over the attempts")


class PipelineStage(BaseModel):
    """One train stage of a pipeline: a run of the chain and what it cost."""

    run_id: str
    name: str
    device_seconds: float
    spend: float | None = Field(description="null when its rate is unknown")
    estimate: bool = Field(description="the stage has not ended: its figures still grow")


class Pipeline(BaseModel):
    """A chain of runs, each started from the one before's checkpoint (`init_from`)."""

    stages: list[PipelineStage] = Field(description="the first stage first, this run last")
    device_seconds: float = Field(description="over every stage")
    spend: float | None = Field(description="over every stage; null when one's is unknown")
    estimate: bool = Field(description="a stage has not ended")


class Cost(BaseModel):
    """Time and devices a run used over all its attempts, and what they cost."""

    duration_s: float | None = Field(description="training time of the run")
    queue_wait_s: float = Field(description="time spent QUEUED, over all attempts")
    device_profile: str
    devices: int
    hourly_rate: float | None = Field(description="per device-hour; null when unknown")
    device_seconds: float
    device_seconds_estimate: bool = Field(
        description="the run has not ended: the figures grow until it does (a run started "
        "by hand whose process died without recording an end ended at its last record)")
    spend: float | None = Field(description="device hours × hourly rate; null when unknown")
    last_step_time_s: float | None
    peak_memory_bytes: dict[str, float | None]
    data_fit: dict[str, float | None] = Field(description="the last value of each "
                                              "data_fit/<count> the run logged")
    problem: str | None = Field(description="why the rate and spend are unknown")
    pipeline: Pipeline | None = Field(None, description="for a run started from an earlier "
                                      "indexed run's checkpoint: the cost of each train "
                                      "stage of the chain and the total")
    times: str | None = Field(None, description="what the figures rest on where no clock "
                              "recorded the run's times (an imported log without one: "
                              "its step times, or made up); null where a clock did")


class Attempt(BaseModel):
    """One attempt of a run (a retry or requeue starts the next)."""

    attempt: int
    phase: str = Field(description="its last phase")
    ended: bool
    phaseMillis: dict[str, float]
    device_seconds: float
    hourly_rate: float | None = Field(description="the rate per device-hour it is priced at: "
                                      "the one its worker recorded when it started it, else "
                                      "its profile's now; null when that is unknown")
    spend: float | None = Field(description="device hours × hourly_rate")
    reason: str | None
    reason_code: str | None
    queued_at: float | None = Field(description="its first event")
    started_at: float | None = Field(description="when a worker started it (its first "
                                     "PREPARING or RUNNING event); null while it waits")
    ended_at: float | None


class Failure(BaseModel):
    """Why a FAILED or CANCELLED run ended, and the failure catalogue's advice; for a run
    started by hand whose process died without recording an end (`process_gone`), the
    verdict every reader gives: it stopped before it finished (`stopped_early`)."""

    code: str | None
    reason: str | None
    what_to_do: str | None


class JobSpec(BaseModel):
    """The job a run was submitted as, and who holds it now."""

    kind: str
    recipe: str | None
    argv: list[str]
    cwd: str
    devices: int
    device_profile: str
    priority: int
    max_attempts: int
    startup_timeout_s: float | None
    submitted_at: float
    attempt: int
    worker_id: str | None
    cancel_requested_at: float | None
    waits_for: str | None = Field(description="for a queued job no worker would start, "
                                  "or a job held by a lost or stopped worker that no live "
                                  "worker can reap: that, and how to start one; null "
                                  "otherwise")


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
    model: ModelOrigin
    state: RunState
    failure: Failure | None
    results: dict[str, float | str | list[str] | None] = Field(
        description="the last value of each result metric, best_train_loss, "
        "registered_model; and non_finite, naming those whose value was NaN or infinite "
        "(sent as null, as a value not known is), only where there are any")
    cost: Cost
    timing: Timing
    attempts: list[Attempt]
    job: JobSpec | None
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
    """One run's series of one key; `min` and `max` only when it was downsampled (and
    bands were asked for)."""

    run: str
    key: str
    full: bool
    count: int
    first_step: int | None = Field(description="the step of the series' first point in the "
                                   "window (null when it has none): where its line starts, "
                                   "since a downsampled bucket is at its last point's step")
    step: list[int]
    value: list[float | None]
    min: list[float | None] = Field(default_factory=list)
    max: list[float | None] = Field(default_factory=list)
    # with x=time: the unix time each point was logged (a bucket: its last point's)
    time: list[float] = Field(default_factory=list)


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
    reward_terms: dict[str, dict[str, float]] | None = Field(
        None, description="with ?reward_terms=true: per split, the mean of each reward term "
        "over the step's rollouts ({} where it kept none)")


class StepRewardTerms(BaseModel):
    step: int
    reward_terms: dict[str, dict[str, float]] = Field(
        description="per split, the mean of each numeric reward term over the step's rollouts")


class RewardTermsPage(BaseModel):
    ok: bool
    steps: list[StepRewardTerms]
    next_lo: int | None = Field(description="the first step of the next page; null on the "
                                "last")


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



class RetryRequest(BaseModel):
    """The body of a retry (POST /api/runs/{run}/retry), which may be left out."""

    model_config = ConfigDict(extra="forbid")

    resume: bool = Field(False, description="continue from the run's last training "
                         "checkpoint, keeping its metrics and checkpoints up to it, instead "
                         "of training again from step 0; a run that holds none is 409")


class ActionAnswer(BaseModel):
    """What a job-control action (submit, cancel, retry) answers: the run's new phase."""

    ok: bool
    status: str
    next: str | None = Field(None, description="what happens to the run next, in words: "
                             "for a submit or retry, which worker starts it, or how to start "
                             "one when none runs; for a cancel of a lost worker's job, which "
                             "live worker stops it, or what that waits for")
    run: RunSummary


class RecipeSetting(BaseModel):
    """One setting of a built-in recipe (`key=value` on its command line)."""

    name: str
    type: str = Field(description="int, float, str or bool")
    nullable: bool = Field(description="none (or null) is a value it takes")
    default: Any
    help: str


class Recipe(BaseModel):
    name: str
    method: str
    help: str
    settings: list[RecipeSetting]


class DeviceProfileInfo(BaseModel):
    """A kind of worker machine a job can ask for, and its rate per device-hour."""

    name: str
    devices: int
    hourly_rate: float
    device_memory_bytes: int
    host_memory_bytes: int


class RecipeList(BaseModel):
    ok: bool
    recipes: list[Recipe]
    device_profiles: list[DeviceProfileInfo]
    default_profile: str


class WorkerJob(BaseModel):
    """A job a worker runs."""

    run_id: str
    name: str
    status: str
    devices: int
    attempt: int
    claimed_at: float | None
    waits_for: str | None = Field(description="null, or what the job of a lost or stopped "
                                  "worker waits for, in words, when no live worker can "
                                  "reap it (a lost Ray worker's job, with no Ray worker up)")


class Worker(BaseModel):
    """A worker: its devices, what it runs, and what it has cost while up."""

    id: str
    host: str
    pid: int
    devices: int
    devices_used: int
    device_profile: str
    executor: str = Field(description="what runs its jobs: local or ray")
    hourly_rate: float | None
    started_at: float
    heartbeat_at: float
    heartbeat_age_s: float
    draining: bool
    stopped_at: float | None
    heartbeat_timeout_s: float = Field(description="how long it may go without a heartbeat "
                                       "before it is lost (its --heartbeat-timeout-s)")
    status: str = Field(description="active, draining, stopped or lost (no heartbeat for "
                        "its heartbeat_timeout_s)")
    unavailable: str | None = Field(
        default=None, description="why a live worker starts no job now, in words (its Ray "
        "cluster does not answer); null when it can, and for a stopped or lost worker")
    spend: float | None = Field(description="devices × hourly rate × hours up; null when "
                                "the rate is unknown")
    jobs: list[WorkerJob]


class WorkerList(BaseModel):
    ok: bool
    queue_depth: int = Field(description="jobs waiting for a worker")
    workers: list[Worker]


class WorkerAnswer(BaseModel):
    ok: bool
    worker: Worker


# --- H1: run page ---


class ParentRun(BaseModel):
    run_id: str
    name: str


class ModelOrigin(BaseModel):
    """The model a run trains; for a run started from an earlier run (`init_from`), the
    base model at the start of the chain and the run it started from."""

    base_model: str | None = Field(description="null when the chain's start is not indexed")
    init_from: str | None = Field(description="the run folder or checkpoint it started from")
    parent: ParentRun | None = Field(description="the indexed run it started from")


RunDetail.model_rebuild()


# --- H4: runs compare (GET /api/compare) ---


class Division(BaseModel):
    """How a run divides its sequences per update (null where it cannot be told)."""

    devices: int
    sequences_per_pass: int | None
    accumulation: int
    sequences_per_update: int | None


class CompareSide(BaseModel):
    run_id: str
    name: str
    method: str | None
    loss_key: str | None
    grad_norm_key: str | None
    loss_steps: int
    grad_norm_median: float | None
    division: Division


class PlanDifference(BaseModel):
    field: str = Field(description="dataset, seed, base_model, base_model_revision, "
                       "sequences_per_update, method, or config.<path>")
    run: Any
    baseline: Any


class ComparePlan(BaseModel):
    same: bool
    differences: list[PlanDifference]
    divided_differently: bool = Field(description="the same plan, with the same sequences "
                                      "per update divided differently")


class CompareWindow(BaseModel):
    first_step: int
    last_step: int
    steps: int = Field(description="steps compared in the window")
    full: bool
    run_loss: float
    baseline_loss: float
    mean_diff: float = Field(description="mean of run loss − baseline loss")
    spikes: int = Field(description="gradient-norm spikes of either run in the window")


class ReportedWindow(CompareWindow):
    index: int
    direction: str = Field(description="higher or lower: the run's loss against the "
                           "baseline's")


class CompareSpike(BaseModel):
    step: int
    run: float | None
    baseline: float | None
    spiked: list[str] = Field(description="run, baseline or both")


class CompareOptions(BaseModel):
    window: int
    margin: float
    spike_factor: float
    across_plans: bool


class CompareReport(BaseModel):
    ok: bool
    run: CompareSide
    baseline: CompareSide
    options: CompareOptions
    plan: ComparePlan
    compared_steps: int
    first_step: int | None
    last_step: int | None
    nonfinite_steps: list[int]
    problems: list[str]
    windows: list[CompareWindow]
    spikes: list[CompareSpike]
    reported: ReportedWindow | None


class IngestHeld(BaseModel):
    """What the index holds of a run (GET /api/ingest?run=): where a sender goes on from."""

    ok: bool
    run_id: str
    folder: bool = Field(description="recorded from a runs folder: ingest refuses its "
                                     "batches (409 folder_run)")
    manifest: dict[str, Any] = Field(description="the run's manifest as the index holds it")
    last_seq: dict[str, int | None] = Field(
        description="per record file (metrics.jsonl, events.jsonl, checkpoints.jsonl, "
                    "logs.jsonl), the highest seq stored; null when none is")
    whole_files: list[str] = Field(
        description="the whole files stored: config.yaml, engine_config.json, job.json, and "
                    "each samples file that holds a sample")
    whole_file_hashes: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="per whole file stored since schema 0020, the size and sha256 of the "
                    "bytes stored: a sender sends again a file whose sha256 differs from the "
                    "one it sent (a server restored from a backup)")


# --- H6: API tokens ---


class ApiToken(BaseModel):
    """A token as the token routes show it: never its secret, only its first characters."""

    id: str
    name: str
    project: str
    right: str = Field(description="read, write or admin")
    hint: str = Field(description="the token's first characters, to tell it apart")
    created_by: str
    created_at: str
    last_used_at: str | None = Field(description="to the minute")
    revoked_at: str | None


class TokenList(BaseModel):
    ok: bool
    tokens: list[ApiToken]


class TokenAnswer(BaseModel):
    ok: bool
    token: ApiToken


class TokenCreated(BaseModel):
    ok: bool
    token: ApiToken
    secret: str = Field(description="the token itself, in this answer only")


# --- W2 ---

class OverlayRun(BaseModel):
    """One run of an overlay: as asked for (`ident`), its list fields, keys and cursor."""

    ident: str
    run: RunSummary
    cursor: str = Field(description="where the run's stream starts, as in MetricKeys")
    keys: list[MetricKey]


class OverlayMissing(BaseModel):
    """A run of an overlay that could not be read, with the error its own request gets."""

    ident: str
    status: int
    error: str


class Overlay(BaseModel):
    ok: bool
    runs: list[OverlayRun]
    missing: list[OverlayMissing]
    edges: Edges
    series: list[SeriesData]
