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
  stage: string | null;
  reason: string | null;
  created_at: string | null;
  started_at: string | null;
  ended_at: string | null;
  duration_s: number | null;
  observed_step: number | null;
  saved_step: number | null;
}

export interface RunList {
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

export interface RunDetail {
  run: RunSummary;
  summary: string;
  state: Record<string, unknown>;
  results: Record<string, unknown>;
  cost: Record<string, unknown>;
  settings: { config: unknown; config_text: string | null; engine_config: unknown };
  checkpoints: { step: number | null; kind: string | null; id: string | null; path: string | null }[];
  problems: string[];
  manifest: Record<string, unknown>;
  scalars: Scalars;
  actions: { cancel: boolean; retry: boolean };
}

export interface MetricKey {
  key: string;
  count: number;
  first_step: number | null;
  last_step: number | null;
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
  edges: { lo: number; hi: number; buckets: number; width: number };
  series: SeriesData[];
}

export interface HistoryPage {
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
}

export interface SamplesResponse {
  available: { step: number; split: string; count: number }[];
  step: number | null;
  split: string | null;
  total: number;
  samples: Sample[];
}

export interface Finding {
  rule: string;
  severity: string;
  title: string;
  message: string;
  advice: string;
  metrics: string[];
  step_start: number | null;
  step_end: number | null;
}

export interface HealthResponse {
  available: boolean;
  findings: Finding[];
}

export interface PointsEvent {
  seq: number;
  step: number;
  values: Record<string, number | null>;
}
