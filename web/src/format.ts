// Formatting of numbers, durations, timestamps and statuses for display.

import { RECORDS_LOST } from "./format.gen";
import type { RunSummary } from "./types";

export function fmtNum(v: number | null | undefined, digits = 4): string {
  if (v === null || v === undefined) return "—";
  if (!Number.isFinite(v)) return String(v);
  if (Number.isInteger(v) && Math.abs(v) < 1e15) return v.toLocaleString("en-US");
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(2);
  return v.toPrecision(digits).replace(/\.?0+$/, "");
}

/** A duration to the nearest second, as every duration on the page (and the charts'
 * relative-time axis) rounds it: a run of 0.98 s took "1s", its device time of 1.02 s too. */
export function fmtDuration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "—";
  const s = Math.max(0, Math.round(seconds));
  const d = Math.floor(s / 86400);
  const hh = Math.floor((s % 86400) / 3600);
  const mm = Math.floor((s % 3600) / 60);
  const ss = s % 60;
  if (d > 0) return `${d}d ${hh}h`;
  if (hh > 0) return `${hh}h ${mm}m`;
  if (mm > 0) return `${mm}m ${ss}s`;
  return `${ss}s`;
}

/**
 * A run's duration as of now: the server's `duration_s` (see docs/api.md), counted on
 * while the run is still going, so the list and the tiles tick without asking again.
 */
export function liveDuration(run: RunSummary, receivedAt: number): number | null {
  if (run.duration_s === null) return null;
  if (run.ended_at || run.process_gone) return run.duration_s;
  return run.duration_s + Math.max(0, Date.now() - receivedAt) / 1000;
}


/** The status as a label, with "(process gone)" when the run's process has died and
 * "(records lost)" when some of its records were not written, as `runwatch runs list`
 * shows it. */
export function statusText(run: RunSummary): string {
  return statusLabel(run.status) + (run.process_gone ? " (process gone)" : "") + (run.reason?.includes(RECORDS_LOST) ? " (records lost)" : "");
}

export function fmtTime(ts: string | null | undefined): string {
  if (!ts) return "—";
  const d = new Date(ts);
  if (Number.isNaN(d.getTime())) return ts;
  return d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

/** A run's status classes: its phase's, and `process-gone` when its process died without
 * recording an end (its dot then no longer pulses as a live run's does). */
export function runStatusClass(run: RunSummary): string {
  return statusClass(run.status) + (run.process_gone ? " process-gone" : "");
}

export function statusClass(status: string): string {
  return `status-${status.toLowerCase().replace(/[^a-z_]/g, "")}`;
}

export function statusLabel(status: string): string {
  const s = status.toLowerCase().replace(/_/g, " ");
  return s.charAt(0).toUpperCase() + s.slice(1);
}

/** Money below this shows as "< 0.0001". */
const LEAST_MONEY = 0.0001;

/**
 * An amount of money in the deployment's currency (a spend, a rate), in fixed notation as
 * the CLI shows it (runwatch.cli.output.fmt_money): "< 0.0001" below a cent's hundredth,
 * else four significant digits with no trailing zeros (0.000273, 0.05, 12.35, 1235).
 */
export function fmtSpend(v: number | null | undefined): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return "—";
  if (v === 0) return "0";
  if (v > 0 && v < LEAST_MONEY) return `< ${LEAST_MONEY.toFixed(4)}`;
  const digits = Math.max(0, 3 - Math.floor(Math.log10(Math.abs(v))));
  const text = v.toFixed(digits);
  return text.includes(".") ? text.replace(/\.?0+$/, "") : text;
}

/**
 * A run's model as lists show it: the base model's name, or for a run started from an
 * earlier run (`init_from:<run folder or checkpoint file>`) "from <that run>", never the
 * raw `init_from:` path. The run page names the base model and links the parent run.
 */
export function modelLabel(base: string | null | undefined): string {
  if (!base) return "—";
  if (!base.startsWith("init_from:")) return base;
  const parts = base.slice("init_from:".length).split(/[\\/]/).filter((p) => p && p !== ".");
  const ckpt = parts.indexOf("checkpoints");
  let name = ckpt > 0 ? parts[ckpt - 1] : parts[parts.length - 1];
  if (ckpt < 0 && name?.endsWith(".pt") && parts.length > 1) name = parts[parts.length - 2];
  return name ? `from run ${name}` : "from an earlier run";
}

/** "2 of at most 3"; a retry by hand past the automatic attempts says so, not "2 of at
 * most 1". */
export function attemptText(attempt: number, maxAttempts: number): string {
  return attempt <= maxAttempts ? `${attempt} of at most ${maxAttempts}` : `${attempt} (retried by hand, past its automatic attempts)`;
}
