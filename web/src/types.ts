// Shapes of the runwatch HTTP API's JSON responses (see docs/api.md).

export interface RunSummary {
  run_id: string;
  name: string;
  project: string | null;
  group: string | null;
  tags: string[];
  method: string | null;
  base_model: string | null;
  dataset: string | null;
  trainer: string | null;
  backend: string | null;
  status: string;
  /** The run has not ended but its training process is gone. */
  process_gone: boolean;
  stage: string | null;
  reason: string | null;
  created_at: string | null;
  started_at: string | null;
  ended_at: string | null;
  /** Seconds from start to end (or now; or the last record when the process is gone). */
  duration_s: number | null;
  observed_step: number | null;
  saved_step: number | null;
  /** 1 for the first attempt; a retry or a requeue adds one. */
  attempt: number;
  /** The failure catalogue's id of `reason`, when it has one. */
  reason_code: string | null;
}

/** GET /api/server: what the server is, and what its indexer says of its runs folder. */
export interface ServerInfo {
  ok: boolean;
  version: string;
  auth: boolean;
  runs_dir: string | null;
  notes: string[];
}

export interface RunList {
  ok: boolean;
  runs: RunSummary[];
  next_cursor: string | null;
}

export interface Scalars {
  steps: number | null;
  examples: number | null;
  tokens: number | null;
  grad_accum: number | null;
  best_train_loss: number | null;
  latest_train_loss: number | null;
  eval_loss: number | null;
  /** The latest mean reward. */
  mean_reward: number | null;
  best_mean_reward: number | null;
  reward_std: number | null;
  val_reward: number | null;
  val_accuracy: number | null;
  preference_accuracy: number | null;
  margin: number | null;
  val_preference_accuracy: number | null;
  val_margin: number | null;
  /** The tiles whose latest value was NaN or infinite (sent as null, as one never logged). */
  non_finite?: TileKey[];
}

/** A tile's name among the Scalars. */
export type TileKey = Exclude<keyof Scalars, "non_finite">;

/** What the run's phase allows; the app shows Cancel and Retry from these. */
export interface Actions {
  cancel: boolean;
  retry: boolean;
}

/** The run's state; times are Unix seconds. */
export interface RunState {
  project: string | null;
  group: string | null;
  tags: string[];
  method: string | null;
  base_model: string | null;
  dataset: string | null;
  trainer: string | null;
  backend: string | null;
  phase: string;
  stage: string | null;
  progress: { done: number | null; total: number } | null;
  observed_step: number | null;
  saved_step: number | null;
  reason: string | null;
  process_gone: boolean;
  created_at: number | null;
  started_at: number | null;
  ended_at: number | null;
  updated_at: number | null;
}

/** One train stage of a pipeline: a run of the chain and what it cost. */
export interface PipelineStage {
  run_id: string;
  name: string;
  device_seconds: number;
  spend: number | null;
  estimate: boolean;
}

/** A chain of runs, each started from the one before's checkpoint (`init_from`). */
export interface Pipeline {
  /** The first stage first, this run last. */
  stages: PipelineStage[];
  device_seconds: number;
  spend: number | null;
  estimate: boolean;
}

/** What a run used over all its attempts; device time and spend are estimates while
 * it has not ended (a run started by hand whose process died ended at its last record). Rate and spend are null when its device profile is unknown
 * (`problem` says why). */
export interface Cost {
  duration_s: number | null;
  queue_wait_s: number;
  device_profile: string;
  devices: number;
  hourly_rate: number | null;
  device_seconds: number;
  device_seconds_estimate: boolean;
  spend: number | null;
  last_step_time_s: number | null;
  peak_memory_bytes: Record<string, number | null>;
  /** The last value of each data_fit/<count> the run logged. */
  data_fit: Record<string, number | null>;
  problem: string | null;
  /** What the figures rest on where no clock recorded the run's times (an imported log
   * without one); null where a clock did. */
  times?: string | null;
  /** For a run started from an earlier indexed run's checkpoint: each train stage's cost
   * and the total. */
  pipeline?: Pipeline | null;
}

/** One attempt of a run: how it ended, its time per phase and the device time it held. */
export interface Attempt {
  attempt: number;
  phase: string;
  ended: boolean;
  phaseMillis: Record<string, number>;
  device_seconds: number;
  /** The rate per device-hour it is priced at: the one its worker recorded when it started
   * it, else its profile's now; null when that is unknown. */
  hourly_rate: number | null;
  /** Device hours × hourly_rate. */
  spend: number | null;
  reason: string | null;
  reason_code: string | null;
  /** Its first event. */
  queued_at: number | null;
  /** When a worker started it (its first PREPARING or RUNNING event); null while it waits. */
  started_at: number | null;
  ended_at: number | null;
}

/** Why a run failed (or was stopped), from the failure catalogue, and what to do; for a
 * run started by hand whose process died without recording an end (`process_gone`), the
 * server's verdict: it stopped before it finished (`stopped_early`). */
export interface Failure {
  code: string | null;
  reason: string | null;
  what_to_do: string | null;
}

/** How a submitted run is run (its job.json and claim); null for a run started by hand. */
export interface JobSpec {
  kind: string;
  recipe: string | null;
  argv: string[];
  cwd: string;
  devices: number;
  device_profile: string;
  priority: number;
  max_attempts: number;
  startup_timeout_s: number | null;
  submitted_at: number;
  attempt: number;
  worker_id: string | null;
  cancel_requested_at: number | null;
  /** For a queued job no worker would start: that, and how to start one; null otherwise. */
  waits_for: string | null;
}

export interface Checkpoint {
  seq: number;
  ts: string | null;
  step: number | null;
  kind: string | null;
  id: string | null;
  path: string | null;
  extra: Record<string, unknown>;
}

export interface Settings {
  config: unknown;
  config_text: string | null;
  engine_config: unknown;
}

export interface RunDetail {
  ok: boolean;
  run_id: string;
  name: string;
  run: RunSummary;
  summary: string;
  /** The model it trains; for a run started from an earlier run (init_from), the base
   * model at the start of the chain and the run it started from. */
  model: { base_model: string | null; init_from: string | null; parent: { run_id: string; name: string } | null };
  state: RunState;
  /** Result values by name; `non_finite` names those that were NaN or infinite (sent as null). */
  results: Record<string, number | string | string[] | null>;
  cost: Cost;
  timing: { phaseMillis: Record<string, number> };
  attempts: Attempt[];
  failure: Failure | null;
  job: JobSpec | null;
  scalars: Scalars;
  actions: Actions;
  checkpoints: Checkpoint[];
  metrics: string[];
  manifest: Record<string, unknown>;
  problems: string[];
  dir: string | null;
  settings: Settings;
  cursor: string;
}

export interface MetricKey {
  key: string;
  count: number;
  last_step: number | null;
  last_value: number | null;
  canonical: string | null;
  role: string | null;
  unit: string | null;
}

export interface MetricKeys {
  ok: boolean;
  cursor: string;
  keys: MetricKey[];
}

export interface SeriesData {
  run: string;
  key: string;
  full: boolean;
  count: number;
  /** The step of the series' first point in the window (null: none): where its line
   * starts, since a downsampled bucket is drawn at its last point's step. */
  first_step: number | null;
  step: number[];
  value: (number | null)[];
  min?: (number | null)[];
  max?: (number | null)[];
  /** with `x=time`: the unix time each point was logged (a bucket: its last point's) */
  time?: number[];
}

export interface SeriesResponse {
  ok: boolean;
  edges: { lo: number; hi: number; buckets: number; width: number };
  series: SeriesData[];
}

export interface HistoryPage {
  ok: boolean;
  columns: string[];
  rows: { step: number; values: Record<string, number | null>; reward_terms?: Record<string, Record<string, number>> | null }[];
  total: number;
  next_cursor: string | null;
  prev_cursor: string | null;
}

export interface LogEntry {
  seq: number;
  ts: string | null;
  level: string;
  message: string;
  data: unknown;
}

export interface LogPage {
  ok: boolean;
  logs: LogEntry[];
  next_cursor: string | null;
}

export interface Sample {
  index: number;
  prompt: unknown;
  completion: unknown;
  reward: number | null;
  reward_terms: Record<string, number | null>;
  advantage: number | null;
  group: unknown;
  truncated: boolean | null;
  tokens: Record<string, number | null>;
  data: Record<string, unknown>;
}

export interface SamplesResponse {
  ok: boolean;
  available: { step: number; split: string; count: number }[];
  step: number | null;
  split: string | null;
  total: number;
  samples: Sample[];
}

export interface Finding {
  id: number | null;
  rule_id: string;
  title: string;
  severity: string;
  status: string;
  metric: string | null;
  first_step: number | null;
  last_step: number | null;
  evidence: Record<string, unknown>;
  message: string;
  advice: string;
  /** The finding's metric first, then the others its rule reads: the charts it shades. */
  metrics: string[];
  opened_ts: number | null;
  updated_ts: number | null;
}

export interface HealthResponse {
  ok: boolean;
  available: boolean;
  findings: Finding[];
  resolved: number;
}

export interface PointsEvent {
  seq: number;
  step: number;
  values: Record<string, number | null>;
}

export interface RecipeSetting {
  name: string;
  /** "int", "float", "str" or "bool". */
  type: string;
  /** The setting also takes none (null). */
  nullable: boolean;
  default: unknown;
  help: string;
}

export interface Recipe {
  name: string;
  method: string;
  help: string;
  settings: RecipeSetting[];
}

export interface DeviceProfileInfo {
  name: string;
  devices: number;
  hourly_rate: number;
  device_memory_bytes: number;
  host_memory_bytes: number;
}

export interface RecipeList {
  ok: boolean;
  recipes: Recipe[];
  device_profiles: DeviceProfileInfo[];
  default_profile: string;
}

/** The answer to a submit, cancel or retry: the run's new phase and list fields. */
export interface ActionAnswer {
  ok: boolean;
  status: string;
  /** Cancel and retry: what happens to the run next, in words. */
  next?: string | null;
  run: RunSummary;
}

export interface WorkerJob {
  run_id: string;
  name: string;
  status: string;
  devices: number;
  attempt: number;
  claimed_at: number | null;
  /** Null, or what the job of a lost or stopped worker waits for, in words, when no live
   * worker can reap it (a lost Ray worker's job, with no Ray worker up). */
  waits_for: string | null;
}

/** A worker and the jobs it runs; times are Unix seconds. Its spend is what it has cost
 * while up (devices × hourly rate × hours), null when its profile is unknown. */
export interface Worker {
  id: string;
  host: string;
  pid: number;
  devices: number;
  devices_used: number;
  device_profile: string;
  /** What runs its jobs: "local" or "ray". */
  executor: string;
  hourly_rate: number | null;
  started_at: number;
  heartbeat_at: number;
  heartbeat_age_s: number;
  /** How long it may go without a heartbeat before it is lost (its --heartbeat-timeout-s). */
  heartbeat_timeout_s: number;
  draining: boolean;
  stopped_at: number | null;
  /** "active", "draining", "stopped", or "lost": not stopped, and no heartbeat for its
   * heartbeat_timeout_s. */
  status: string;
  /** Why a live worker starts no job now (its Ray cluster does not answer); null when it can. */
  unavailable?: string | null;
  spend: number | null;
  jobs: WorkerJob[];
}

export interface WorkerList {
  ok: boolean;
  queue_depth: number;
  workers: Worker[];
}

/** The answer to a drain: the worker as it is now. */
export interface WorkerAnswer {
  ok: boolean;
  worker: Worker;
}

// --- H3: compare ---

/** GET /api/compare: a supervised run's training loss against a baseline's, the report of
 * `runwatch runs compare RUN BASELINE -o json` (docs/api.md). Difference = run − baseline. */
export interface CompareReport {
  ok: boolean;
  run: { run_id: string; name: string; method: string | null; loss_key: string | null; grad_norm_key: string | null; loss_steps: number; grad_norm_median: number | null; division: { devices: number; sequences_per_pass: number | null; accumulation: number; sequences_per_update: number | null } };
  baseline: { run_id: string; name: string; method: string | null; loss_key: string | null; grad_norm_key: string | null; loss_steps: number; grad_norm_median: number | null; division: { devices: number; sequences_per_pass: number | null; accumulation: number; sequences_per_update: number | null } };
  options: { window: number; margin: number; spike_factor: number; across_plans: boolean };
  plan: { same: boolean; differences: { field: string; run: unknown; baseline: unknown }[]; divided_differently: boolean };
  compared_steps: number;
  first_step: number | null;
  last_step: number | null;
  nonfinite_steps: number[];
  problems: string[];
  windows: { first_step: number; last_step: number; steps: number; full: boolean; run_loss: number; baseline_loss: number; mean_diff: number; spikes: number }[];
  spikes: { step: number; run: number | null; baseline: number | null; spiked: string[] }[];
  /** The first full window past the margin, null when none is. */
  reported: { index: number; direction: string; first_step: number; last_step: number; steps: number; full: boolean; run_loss: number; baseline_loss: number; mean_diff: number; spikes: number } | null;
}

// --- W2 ---

/** GET /api/overlay (docs/api.md "Several runs at once"): one run read. */
export interface OverlayRun {
  /** The run as it was asked for (an id, a name or a prefix of either). */
  ident: string;
  run: RunSummary;
  /** Where the run's stream starts: as MetricKeys.cursor. */
  cursor: string;
  keys: MetricKey[];
}

export interface OverlayMissing {
  ident: string;
  status: number;
  /** The server's words (what GET /api/runs/{ident} would answer); plainError for the page. */
  error: string;
}

/** Several runs' list fields, keys and cursors, and the whole series of the selected keys. */
export interface Overlay {
  ok: boolean;
  runs: OverlayRun[];
  missing: OverlayMissing[];
  edges: { lo: number; hi: number; buckets: number; width: number };
  /** One per (run, key) the selectors picked in that run; `run` is the run id. */
  series: SeriesData[];
}
