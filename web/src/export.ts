// Export: a table as a CSV file, a chart as a PNG, both downloaded by the browser.

import type { ResolvedLine } from "./chartspecs";
import type { ChartView, TimedSeries } from "./chartview";

type Cell = string | number | null;

/** One CSV field (RFC 4180): quoted when it holds a comma, quote or line break. */
function field(v: Cell): string {
  if (v === null || (typeof v === "number" && !Number.isFinite(v))) return "";
  const s = String(v);
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

export function toCsv(header: string[], rows: Cell[][]): string {
  return [header, ...rows].map((r) => r.map(field).join(",")).join("\r\n") + "\r\n";
}

function download(filename: string, href: string): void {
  const a = document.createElement("a");
  a.href = href;
  a.download = filename;
  a.style.display = "none";
  document.body.appendChild(a);
  a.click();
  a.remove();
}

/** Have the browser save `rows` under `header` as a CSV file. */
export function downloadCsv(filename: string, header: string[], rows: Cell[][]): void {
  const url = URL.createObjectURL(new Blob([toCsv(header, rows)], { type: "text/csv" }));
  download(filename, url);
  // the download has its own copy once the click is handled
  window.setTimeout(() => URL.revokeObjectURL(url), 0);
}

/** The chart as drawn, legend included, as a PNG data URL. */
export function chartPng(view: ChartView): string {
  return view.pngDataUrl();
}

export function downloadPng(filename: string, view: ChartView): void {
  download(filename, chartPng(view));
}

// A value the API sent as null at a step the series holds: a NaN or an infinity (docs/api.md
// sends them as null; a step the key was not logged at is not in the series). Written as
// `runwatch runs metrics -o csv` writes a NaN, never as the empty cell of a missing value.
const NON_FINITE = "nan";

/**
 * A chart's lines as one table joined on the step: `step`, `time` (unix seconds, where the
 * series carry it), then one column per line, and `<line> min` / `<line> max` for a line the
 * server downsampled (its column is then each bucket's last value). An empty cell is a step
 * the line has no point at; `nan` a point whose value was not finite.
 */
export function seriesTable(lines: ResolvedLine[], series: TimedSeries[]): { header: string[]; rows: Cell[][] } {
  const picked = lines.map((l) => series.find((s) => s.key === l.key && (l.run === undefined || s.run === l.run)));
  const withTime = picked.some((s) => s?.time?.some(Number.isFinite));
  const header = ["step", ...(withTime ? ["time"] : [])];
  const columns: { at: Map<number, Cell>; }[] = [];
  const times = new Map<number, number>();
  lines.forEach((l, i) => {
    const s = picked[i];
    const banded = !!(s && !s.full && s.min && s.max);
    const cols = banded ? [l.label, `${l.label} min`, `${l.label} max`] : [l.label];
    header.push(...cols);
    const maps = cols.map(() => new Map<number, Cell>());
    s?.step.forEach((step, j) => {
      maps[0].set(step, s.value[j] ?? NON_FINITE);
      if (banded) {
        maps[1].set(step, s.min?.[j] ?? NON_FINITE);
        maps[2].set(step, s.max?.[j] ?? NON_FINITE);
      }
      const t = s.time?.[j];
      if (t !== undefined && Number.isFinite(t) && !times.has(step)) times.set(step, t);
    });
    for (const at of maps) columns.push({ at });
  });
  const steps = [...new Set(picked.flatMap((s) => s?.step ?? []))].sort((a, b) => a - b);
  const rows = steps.map((step) => [step, ...(withTime ? [times.get(step) ?? null] : []), ...columns.map((c) => c.at.get(step) ?? null)]);
  return { header, rows };
}
