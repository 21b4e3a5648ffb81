// Which charts the detail pane draws, and which metric roles feed each line.
// The names that play a role come from the vocabulary (metrics.gen.ts, generated from
// src/runwatch/metrics): the same key the server and the CLI pick for that role.

import { ALIASES, PATTERNS, PREFIXES, ROLE_NAMES, type Role } from "./metrics.gen";

export interface LineSpec {
  label: string;
  roles?: Role[]; // the first role a key of the run plays wins
  names?: string[]; // canonical names (docs/metrics.md), for metrics that play no role
}

export interface ChartSpec {
  id: string;
  title: string;
  group: string;
  lines: LineSpec[];
  prefix?: string; // every key under this prefix becomes a line
  logY?: boolean;
}

/** Charts the metric picker added, and charts of metrics a health finding names that no
 * other chart shows: each holds one key. */
export const ADDED_GROUP = "Added";
export const FLAGGED_GROUP = "Flagged by health";

export const GROUPS = ["Training", "GRPO stability", "GRPO sampling", "Generation", "Async collection", "Optimizer", "Timing", ADDED_GROUP, FLAGGED_GROUP];

export const CHARTS: ChartSpec[] = [
  {
    id: "loss",
    title: "Loss",
    group: "Training",
    lines: [
      { label: "train", roles: ["train_loss"] },
      { label: "val", roles: ["eval_loss"] },
    ],
  },
  {
    id: "lr",
    title: "Learning rate",
    group: "Training",
    logY: true,
    lines: [{ label: "learning rate", roles: ["learning_rate"] }],
  },
  {
    id: "accuracy",
    title: "Accuracy",
    group: "Training",
    lines: [
      { label: "train", roles: ["accuracy"] },
      { label: "val", roles: ["val_accuracy"] },
      { label: "val preference", roles: ["val_preference_accuracy"] },
    ],
  },
  {
    id: "reward",
    title: "Reward",
    group: "Training",
    lines: [
      { label: "train", roles: ["reward"] },
      { label: "val", roles: ["val_reward"] },
    ],
  },
  {
    id: "margin",
    title: "DPO margin (nats)",
    group: "Training",
    lines: [
      { label: "train", roles: ["margin"] },
      { label: "val", roles: ["val_margin"] },
    ],
  },
  {
    id: "ratio",
    title: "Importance ratio",
    group: "GRPO stability",
    lines: [
      { label: "ratio mean", roles: ["ratio_mean"] },
      { label: "clipped ratio mean", roles: ["clipped_ratio_mean"] },
    ],
  },
  {
    id: "clip",
    title: "Clip fractions",
    group: "GRPO stability",
    lines: [
      { label: "high", roles: ["clip_high"] },
      { label: "low", roles: ["clip_low"] },
    ],
  },
  {
    id: "kl",
    title: "KL",
    group: "GRPO stability",
    lines: [
      { label: "policy", roles: ["kl_policy"] },
      { label: "policy k3", roles: ["kl_policy_k3"] },
      { label: "reference", roles: ["kl_ref"] },
    ],
  },
  // the spec's "what to watch first" for GRPO sampling (monitor-training-runs)
  {
    id: "skip",
    title: "Skipped groups",
    group: "GRPO sampling",
    lines: [
      { label: "zero variance", names: ["zero_variance_skip_ratio"] },
      { label: "all succeeded", names: ["identical_nonzero_reward_skip_ratio"] },
    ],
  },
  {
    id: "spread",
    title: "Reward spread",
    group: "GRPO sampling",
    lines: [
      { label: "reward std", names: ["reward_std"] },
      { label: "advantage std", names: ["completion_advantage_std"] },
    ],
  },
  // what the model generates, while training (GRPO's samples) or in validation (SFT's
  // and GRPO's val/ lengths): no method's own heading
  {
    id: "truncation",
    title: "Truncated completions",
    group: "Generation",
    lines: [
      { label: "train", names: ["truncated_ratio"] },
      { label: "val", names: ["val/truncated_ratio"] },
    ],
  },
  {
    id: "length",
    title: "Response length (tokens)",
    group: "Generation",
    lines: [
      { label: "train", names: ["mean_sampled_response_length"] },
      { label: "val", names: ["val/mean_response_length"] },
    ],
  },
  {
    id: "staleness",
    title: "Staleness (steps)",
    group: "Async collection",
    lines: [
      { label: "mean", names: ["async/staleness_mean"] },
      { label: "max", names: ["async/staleness_max"] },
    ],
  },
  // the optimizer fields every run reports (observe-a-run, "Metrics")
  { id: "grad_norm", title: "Gradient norm", group: "Optimizer", lines: [{ label: "grad norm", roles: ["grad_norm"] }] },
  {
    id: "grad_clip_factor",
    title: "Gradient clip factor",
    group: "Optimizer",
    lines: [{ label: "clip factor", roles: ["grad_clip_factor"] }],
  },
  { id: "update_ratio", title: "Update ratio", group: "Optimizer", logY: true, lines: [{ label: "update ratio", roles: ["update_ratio"] }] },
  { id: "adapter_norm", title: "Adapter norm", group: "Optimizer", lines: [{ label: "adapter norm", roles: ["adapter_norm"] }] },
  { id: "timing", title: "Step timing (s)", group: "Timing", lines: [], prefix: "timing/" },
];

// canonicalName's answers by key: a page of 10 runs resolves 20 charts' roles in each
// run's keys, each role not logged trying every key against the patterns again
const CANONICAL = new Map<string, [string, string | null]>();

/** The canonical name of a logged key and the transform its values need (null: as is). */
export function canonicalName(key: string): [string, string | null] {
  let found = CANONICAL.get(key);
  if (!found) {
    found = canonicalOf(key);
    CANONICAL.set(key, found);
  }
  return [found[0], found[1]];
}

function canonicalOf(key: string): [string, string | null] {
  let name = key;
  for (const [prefix, replacement] of PREFIXES) {
    if (name.startsWith(prefix)) {
      name = replacement + name.slice(prefix.length);
      break;
    }
  }
  const exact = ALIASES.get(name);
  if (exact) return [exact[0], exact[1]];
  const pattern = PATTERNS.find(([re]) => re.test(name));
  return pattern ? [pattern[1], null] : [name, null];
}

/** The key among `keys` that plays `role`: the canonical name, then a listed alias, then
 * (first in sorted order) a key the prefix and pattern rules map to it as is. */
export function findKey(keys: Set<string>, role: Role): string | undefined {
  const listed = ROLE_NAMES[role];
  const found = listed.find((n) => keys.has(n));
  if (found) return found;
  return [...keys].sort().find((k) => {
    const [name, transform] = canonicalName(k);
    return name === listed[0] && transform === null;
  });
}

/** The key among `keys` logged under canonical `name` (or an alias of it that needs no
 * transform of its values): the name itself first, then the first in sorted order. */
export function findName(keys: Set<string>, name: string): string | undefined {
  if (keys.has(name)) return name;
  return [...keys].sort().find((k) => {
    const [canonical, transform] = canonicalName(k);
    return canonical === name && transform === null;
  });
}

export interface ResolvedLine {
  label: string;
  key: string;
  run?: string; // the run the line belongs to, where a chart overlays several runs
  color?: string; // a colour of the caller's choosing (an overlay colours by run); else by label
}

/** The lines of `spec` that the run has data for; empty means the chart is not drawn. */
export function resolveLines(spec: ChartSpec, keys: Set<string>): ResolvedLine[] {
  if (spec.prefix) {
    const prefix = spec.prefix;
    return [...keys]
      .filter((k) => k.startsWith(prefix))
      .sort()
      .map((k) => ({ label: k.slice(prefix.length), key: k }));
  }
  const out: ResolvedLine[] = [];
  for (const line of spec.lines) {
    const key = [
      ...(line.roles ?? []).map((role) => findKey(keys, role)),
      ...(line.names ?? []).map((name) => findName(keys, name)),
    ].find((k) => k !== undefined);
    if (key) out.push({ label: line.label, key });
  }
  return out;
}

/** The key a history column shows under a friendly name. */
export const HISTORY_COLUMNS: LineSpec[] = [
  { label: "train loss", roles: ["train_loss"] },
  { label: "val loss", roles: ["eval_loss"] },
  { label: "accuracy", roles: ["accuracy", "val_accuracy"] },
  { label: "reward", roles: ["reward"] },
  { label: "learning rate", roles: ["learning_rate"] },
  { label: "grad norm", roles: ["grad_norm"] },
];
