// Which charts the detail pane draws, and which metric keys feed each line.

export interface LineSpec {
  label: string;
  keys: string[]; // candidates, first present wins
}

export interface ChartSpec {
  id: string;
  title: string;
  group: string;
  lines: LineSpec[];
  prefix?: string; // every key under this prefix becomes a line
  logY?: boolean;
}

export const GROUPS = ["Training", "GRPO stability", "Timing"];

export const CHARTS: ChartSpec[] = [
  {
    id: "loss",
    title: "Loss",
    group: "Training",
    lines: [
      { label: "train", keys: ["loss", "train_loss", "train/loss"] },
      { label: "val", keys: ["val/loss", "val_loss", "eval/loss", "eval_loss"] },
    ],
  },
  {
    id: "lr",
    title: "Learning rate",
    group: "Training",
    logY: true,
    lines: [{ label: "learning rate", keys: ["learning_rate", "lr", "train/learning_rate"] }],
  },
  {
    id: "accuracy",
    title: "Accuracy",
    group: "Training",
    lines: [
      { label: "train", keys: ["accuracy", "train/accuracy"] },
      { label: "val", keys: ["val/accuracy"] },
      { label: "val preference", keys: ["val/preference_accuracy"] },
    ],
  },
  {
    id: "reward",
    title: "Reward",
    group: "Training",
    lines: [
      { label: "train", keys: ["reward", "reward_mean", "train/reward_mean"] },
      { label: "val", keys: ["val/reward_mean"] },
    ],
  },
  {
    id: "ratio",
    title: "Importance ratio",
    group: "GRPO stability",
    lines: [
      { label: "ratio mean", keys: ["fb/loss/ratio/mean"] },
      { label: "clipped ratio mean", keys: ["fb/loss/clip/clipped_ratio/mean"] },
    ],
  },
  {
    id: "clip",
    title: "Clip fractions",
    group: "GRPO stability",
    lines: [
      { label: "high", keys: ["fb/loss/clip/high_fraction"] },
      { label: "low", keys: ["fb/loss/clip/low_fraction"] },
    ],
  },
  {
    id: "kl",
    title: "KL",
    group: "GRPO stability",
    lines: [
      { label: "policy", keys: ["fb/loss/kl_policy/mean"] },
      { label: "policy k3", keys: ["fb/loss/kl_policy/k3/mean"] },
      { label: "reference", keys: ["fb/loss/kl_ref/mean"] },
    ],
  },
  { id: "timing", title: "Step timing (s)", group: "Timing", lines: [], prefix: "timing/" },
];

export interface ResolvedLine {
  label: string;
  key: string;
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
    const key = line.keys.find((k) => keys.has(k));
    if (key) out.push({ label: line.label, key });
  }
  return out;
}

/** The key a history column shows under a friendly name. */
export const HISTORY_COLUMNS: LineSpec[] = [
  { label: "train loss", keys: ["loss", "train_loss", "train/loss"] },
  { label: "val loss", keys: ["val/loss", "val_loss", "eval/loss", "eval_loss"] },
  { label: "accuracy", keys: ["accuracy", "train/accuracy", "val/accuracy"] },
  { label: "reward", keys: ["reward", "reward_mean", "train/reward_mean"] },
  { label: "learning rate", keys: ["learning_rate", "lr", "train/learning_rate"] },
  { label: "grad norm", keys: ["grad_norm", "actor/grad_norm"] },
];
