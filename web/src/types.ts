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
  mean_reward: number | null;
}

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

export interface Cost {
  duration_s: number | null;
  timing: { phaseMillis: Record<string, number> };
  device_seconds: number;
  device_seconds_estimate: boolean;
  last_step_time_s: number | null;
  peak_memory_bytes: Record<string, number | null>;
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
  state: RunState;
  results: Record<string, number | string | null>;
  cost: Cost;
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
  step: number[];
  value: (number | null)[];
  min?: (number | null)[];
  max?: (number | null)[];
}

export interface SeriesResponse {
  ok: boolean;
  edges: { lo: number; hi: number; buckets: number; width: number };
  series: SeriesData[];
}

export interface HistoryPage {
  ok: boolean;
  columns: string[];
  rows: { step: number; values: Record<string, number | null> }[];
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
