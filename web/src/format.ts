// Formatting of numbers, durations, timestamps and statuses for display.

export function fmtNum(v: number | null | undefined, digits = 4): string {
  if (v === null || v === undefined) return "—";
  if (!Number.isFinite(v)) return String(v);
  if (Number.isInteger(v) && Math.abs(v) < 1e15) return v.toLocaleString("en-US");
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(2);
  return v.toPrecision(digits).replace(/\.?0+$/, "");
}

export function fmtDuration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "—";
  const s = Math.max(0, Math.floor(seconds));
  const d = Math.floor(s / 86400);
  const hh = Math.floor((s % 86400) / 3600);
  const mm = Math.floor((s % 3600) / 60);
  const ss = s % 60;
  if (d > 0) return `${d}d ${hh}h`;
  if (hh > 0) return `${hh}h ${mm}m`;
  if (mm > 0) return `${mm}m ${ss}s`;
  return `${ss}s`;
}

export function liveDuration(startedAt: string | null, endedAt: string | null, fallback: number | null): number | null {
  if (!startedAt) return fallback;
  const start = Date.parse(startedAt);
  const end = endedAt ? Date.parse(endedAt) : Date.now();
  if (Number.isNaN(start) || Number.isNaN(end)) return fallback;
  return (end - start) / 1000;
}

export function fmtTime(ts: string | null | undefined): string {
  if (!ts) return "—";
  const d = new Date(ts);
  if (Number.isNaN(d.getTime())) return ts;
  return d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

const TERMINAL = new Set(["SUCCEEDED", "FAILED", "CANCELLED"]);

export function isTerminal(status: string): boolean {
  return TERMINAL.has(status.toUpperCase());
}

export function statusClass(status: string): string {
  return `status-${status.toLowerCase().replace(/[^a-z_]/g, "")}`;
}

export function statusLabel(status: string): string {
  const s = status.toLowerCase().replace(/_/g, " ");
  return s.charAt(0).toUpperCase() + s.slice(1);
}
