// One ECharts chart: EMA line over a faint raw line, a min/max band where the
// server downsampled, zoom that asks for full resolution, and live appends.
// The x axis is the step, the wall time, the time since the run's first point, or the
// tokens trained so far; a zoom is always turned into a step range for the server.

import { CustomChart, LineChart } from "echarts/charts";
import {
  DataZoomComponent,
  GridComponent,
  LegendComponent,
  MarkAreaComponent,
  TooltipComponent,
} from "echarts/components";
import * as echarts from "echarts/core";
import { CanvasRenderer } from "echarts/renderers";
import { canonicalName, type ResolvedLine } from "./chartspecs";
import { chartTheme, cssVar, onThemeChange } from "./theme";
import type { Finding, SeriesData } from "./types";

echarts.use([
  LineChart,
  CustomChart,
  GridComponent,
  TooltipComponent,
  LegendComponent,
  DataZoomComponent,
  MarkAreaComponent,
  CanvasRenderer,
]);

// Line colours: CSS variables (they follow dark mode) with their light values as fallback,
// then two mid tones that read on either background.
const PALETTE: [string, string][] = [
  ["--blue", "#2563eb"],
  ["--orange", "#ea580c"],
  ["--green", "#16a34a"],
  ["--red", "#dc2626"],
  ["", "#9333ea"],
  ["", "#0891b2"],
  ["--amber", "#d97706"],
  ["--gray", "#9ca3af"],
];
// A line labelled train or val has the same colour on every chart.
const LABEL_SLOT: Record<string, number> = { train: 0, val: 1 };
const SEVERITY_COLOR: Record<string, string> = {
  critical: "rgba(220,38,38,0.15)",
  error: "rgba(220,38,38,0.15)",
  warning: "rgba(234,179,8,0.18)",
  info: "rgba(37,99,235,0.10)",
};
/** A line with fewer points than this is drawn as logged, never smoothed. */
export const MIN_SMOOTH_POINTS = 10;

/** A series item as the series API sends it with `x=time`: with each point's time (unix
 * seconds, a downsampled bucket's last point's). */
export type TimedSeries = SeriesData & { time?: number[] };

export type XMode = "step" | "time" | "relative" | "tokens";

export const X_LABELS: Record<XMode, string> = {
  step: "step",
  time: "wall time",
  relative: "relative time",
  tokens: "tokens",
};

/** The tokens trained up to each step (ascending steps), for the tokens x axis. */
export interface TokenAxis {
  steps: number[];
  total: number[];
}

export interface ChartOptions {
  /** Show the legend even for one line (a chart whose lines are one of several, e.g. val only). */
  legend?: boolean;
  x?: XMode;
  tokens?: TokenAxis | null;
}

/**
 * A line's points as ECharts reads them fastest (no copy of an array per point, read in
 * one pass): a flat typed array of (x, y, step) triples, NaN where a value is missing (a
 * gap in the line, as null is). The step rides along so a tooltip names the step of the
 * point under it.
 */
function points(xs: (number | null)[], ys: (number | null)[], steps: number[]): Float64Array {
  const out = new Float64Array(steps.length * 3);
  for (let j = 0; j < steps.length; j++) {
    out[3 * j] = xs[j] ?? NaN;
    out[3 * j + 1] = ys[j] ?? NaN;
    out[3 * j + 2] = steps[j];
  }
  return out;
}

const finite = (v: number | null | undefined): number | null => (typeof v === "number" && Number.isFinite(v) ? v : null);

interface LineData {
  line: ResolvedLine;
  step: number[];
  time: number[]; // unix seconds; NaN where unknown
  value: (number | null)[];
  min: (number | null)[] | null;
  max: (number | null)[] | null;
  full: boolean;
  count: number;
}

/** TensorBoard-style debiased exponential moving average; nulls pass through. */
export function ema(values: (number | null)[], weight: number): (number | null)[] {
  const out: (number | null)[] = new Array(values.length);
  let last = 0;
  let n = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v === null || !Number.isFinite(v)) {
      out[i] = null;
      continue;
    }
    last = last * weight + (1 - weight) * v;
    n += 1;
    out[i] = weight === 0 ? v : last / (1 - Math.pow(weight, n));
  }
  return out;
}

function medianGap(step: number[]): number {
  if (step.length < 2) return Infinity;
  const gaps = step.slice(1).map((s, i) => s - step[i]).sort((a, b) => a - b);
  return gaps[Math.floor(gaps.length / 2)];
}

/**
 * Which lines of a chart smoothing applies to. An EMA is a trade of each point's own value
 * for its neighbours': a fair trade on a dense, noisy line, a false one on a sparse line
 * (validation every few hundred steps), whose few points are each a measurement in their own
 * right and whose last value the EMA would drag towards the first. So a line is smoothed only
 * when it has at least MIN_SMOOTH_POINTS points and they are about as dense (median step gap
 * at most twice) as the densest line's of the chart; every other line is drawn as logged.
 */
export function smoothedLines(steps: number[][]): boolean[] {
  const gaps = steps.map(medianGap);
  const densest = Math.min(...gaps);
  return steps.map((s, i) => s.length >= MIN_SMOOTH_POINTS && gaps[i] <= 2 * densest);
}

/** The tokens trained up to `step`: exact at a logged step, interpolated between. */
export function tokensAt(axis: TokenAxis, step: number): number | null {
  const { steps, total } = axis;
  if (!steps.length) return null;
  let lo = 0;
  let hi = steps.length - 1;
  if (step <= steps[0]) return total[0];
  if (step >= steps[hi]) return total[hi];
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (steps[mid] <= step) lo = mid;
    else hi = mid;
  }
  const f = (step - steps[lo]) / (steps[hi] - steps[lo]);
  return total[lo] + f * (total[hi] - total[lo]);
}

/** What a chart draws faintly under one line: its min/max band where the server
 * downsampled, and its raw values where the line is smoothed. */
interface Under {
  color: string;
  xs: (number | null)[];
  min: (number | null)[] | null;
  max: (number | null)[] | null;
  raw: (number | null)[] | null;
}

/**
 * Everything a chart draws faintly under its lines, in one custom series: each band as a
 * polygon and each raw line as polylines (broken where a value is missing). One series
 * for them all, instead of two per line, is most of what ECharts' cost per chart depends
 * on. Two data items carry their extent so the axes make room for them; only the first
 * draws.
 */
function underSeries(layers: Under[]): Record<string, unknown> | null {
  let lo = Infinity;
  let hi = -Infinity;
  let x0 = Infinity;
  let x1 = -Infinity;
  for (const { xs, min, max, raw } of layers) {
    for (let j = 0; j < xs.length; j++) {
      const x = xs[j];
      if (x === null) continue;
      for (const v of [min?.[j], max?.[j], raw?.[j]]) {
        if (v === null || v === undefined || !Number.isFinite(v)) continue;
        if (v < lo) lo = v;
        if (v > hi) hi = v;
        if (x < x0) x0 = x;
        if (x > x1) x1 = x;
      }
    }
  }
  if (!Number.isFinite(lo)) return null;
  return {
    type: "custom",
    id: "under",
    silent: true,
    clip: true,
    tooltip: { show: false },
    data: [[x0, lo], [x1, hi]],
    renderItem: (params: { dataIndex: number }, api: { coord: (v: [number, number]) => number[] }) => {
      if (params.dataIndex !== 0) return null;
      const children: Record<string, unknown>[] = [];
      for (const { color, xs, min, max, raw } of layers) {
        if (min && max) {
          const upper: number[][] = [];
          const lower: number[][] = [];
          for (let j = 0; j < xs.length; j++) {
            if (min[j] === null || max[j] === null || xs[j] === null) continue;
            upper.push(api.coord([xs[j] as number, max[j] as number]));
            lower.push(api.coord([xs[j] as number, min[j] as number]));
          }
          children.push({ type: "polygon", shape: { points: upper.concat(lower.reverse()) }, style: { fill: color, opacity: 0.15 } });
        }
        if (raw) {
          let points: number[][] = [];
          const flush = () => {
            if (points.length > 1) children.push({ type: "polyline", shape: { points }, style: { stroke: color, lineWidth: 1, opacity: 0.25, fill: "none" } });
            points = [];
          };
          for (let j = 0; j < xs.length; j++) {
            const v = raw[j];
            if (xs[j] === null || v === null || !Number.isFinite(v)) flush();
            else points.push(api.coord([xs[j] as number, v]));
          }
          flush();
        }
      }
      return { type: "group", children };
    },
  };
}

function axisNumber(v: number): string {
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e5)) return v.toExponential(0);
  return String(Number(v.toPrecision(4)));
}

/** A duration in seconds as the relative-time axis shows it: 45s, 12m, 12m 05s, 3h 07m. */
export function duration(seconds: number): string {
  const s = Math.round(seconds);
  const sign = s < 0 ? "-" : "";
  const a = Math.abs(s);
  if (a < 60) return `${sign}${a}s`;
  if (a < 3600) return `${sign}${Math.floor(a / 60)}m` + (a % 60 ? ` ${String(a % 60).padStart(2, "0")}s` : "");
  const m = Math.floor((a % 3600) / 60);
  return `${sign}${Math.floor(a / 3600)}h` + (m ? ` ${String(m).padStart(2, "0")}m` : "");
}

// Tick steps of the relative-time axis: whole seconds, minutes and hours, not 100 s.
const DURATION_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];

/** The tick step for a relative-time axis spanning `span` seconds: about six ticks. */
export function durationInterval(span: number): number {
  const want = span / 6;
  return DURATION_STEPS.find((s) => s >= want) ?? Math.ceil(want / 86400) * 86400;
}

function compact(v: number): string {
  const a = Math.abs(v);
  if (a >= 1e9) return `${Number((v / 1e9).toPrecision(3))}G`;
  if (a >= 1e6) return `${Number((v / 1e6).toPrecision(3))}M`;
  if (a >= 1e3) return `${Number((v / 1e3).toPrecision(3))}k`;
  return String(Math.round(v));
}

function colorOf(slot: number): string {
  const [name, fallback] = PALETTE[slot % PALETTE.length];
  return (name && cssVar(name)) || fallback;
}

/**
 * Each line's colour: its own if given; on a chart of several runs, one colour per run (a
 * run's later lines are dashed, see `dashedLines`); else train and val fixed and the rest
 * the first colour free.
 */
function lineColors(lines: ResolvedLine[]): string[] {
  if (lines.some((l) => l.run !== undefined)) {
    const runs = [...new Set(lines.map((l) => l.run ?? ""))];
    return lines.map((l) => l.color ?? colorOf(runs.indexOf(l.run ?? "")));
  }
  const taken = new Set<number>();
  const slots: (number | null)[] = lines.map((l) => {
    const slot = l.color ? null : LABEL_SLOT[l.label];
    if (slot !== undefined && slot !== null && !taken.has(slot)) {
      taken.add(slot);
      return slot;
    }
    return null;
  });
  return lines.map((l, i) => {
    if (l.color) return l.color;
    let slot = slots[i];
    if (slot === null) {
      slot = 0;
      while (taken.has(slot) && slot < PALETTE.length) slot++;
      taken.add(slot);
    }
    return colorOf(slot);
  });
}

/** On a chart of several runs, the lines after a run's first (its val line, say) are dashed. */
function dashedLines(lines: ResolvedLine[]): boolean[] {
  const seen = new Set<string>();
  return lines.map((l) => {
    if (l.run === undefined) return false;
    const again = seen.has(l.run);
    seen.add(l.run);
    return again;
  });
}

/**
 * Fit charts to their boxes: every box measured first, then every chart resized, so that
 * the page is laid out once rather than once per chart (a chart made in a box not yet on
 * the page has no size until then).
 */
export function fitCharts(views: Iterable<ChartView>): void {
  const list = [...views];
  const sizes = list.map((v) => [v.el.clientWidth, v.el.clientHeight]);
  list.forEach((v, i) => v.fit(sizes[i][0], sizes[i][1]));
}

export class ChartView {
  readonly el: HTMLElement;
  private chart: echarts.ECharts;
  private data: LineData[];
  private smoothing: number;
  private findings: Finding[] = [];
  private pending = false;
  private initialized = false;
  private zoomTimer: number | undefined;
  private xMode: XMode;
  private tokens: TokenAxis | null;
  private readonly legend: boolean;
  private t0 = Infinity; // the first point's time, where relative time counts from
  private labelsSeen = new Set<string>();
  private labelsPending = false;
  private stopTheme: () => void;
  private unzoom = false; // the next full render shows the whole x range
  private hidden: Record<string, boolean> = {}; // the legend's selection: false where a line is hidden
  zoomed: { lo: number; hi: number } | null = null;

  constructor(
    el: HTMLElement,
    readonly lines: ResolvedLine[],
    private logY: boolean,
    smoothing: number,
    private readonly onZoom: (range: { lo: number; hi: number } | null) => void,
    options: ChartOptions = {},
  ) {
    this.el = el;
    this.smoothing = smoothing;
    this.xMode = options.x ?? "step";
    this.tokens = options.tokens ?? null;
    this.legend = options.legend ?? false;
    this.data = lines.map((line) => ({ line, step: [], time: [], value: [], min: null, max: null, full: true, count: 0 }));
    this.chart = echarts.init(el, undefined, { renderer: "canvas" });
    this.chart.on("datazoom", () => this.zoomChanged());
    this.chart.on("legendselectchanged", (e: unknown) => {
      this.hidden = { ...(e as { selected: Record<string, boolean> }).selected };
      this.render(false);
    });
    this.stopTheme = onThemeChange(() => this.render(true));
    el.dataset.x = this.xMode;
    el.dataset.log = String(this.logY);
  }

  get keys(): string[] {
    return this.lines.map((l) => l.key);
  }

  get x(): XMode {
    return this.xMode;
  }

  /** Whether the chart's fetches must ask for each point's time (`x=time`). */
  get needsTime(): boolean {
    return this.xMode === "time" || this.xMode === "relative";
  }

  /**
   * Replace the data of every line with a server response. With `keepNewer` (a chart's
   * first load, which live points may overtake while it is fetched), the points already
   * appended past the response's last step stay after it.
   */
  setSeries(series: TimedSeries[], keepNewer = false): void {
    for (const d of this.data) {
      const s = series.find((x) => x.key === d.line.key && (d.line.run === undefined || x.run === d.line.run));
      if (!s) continue;
      const last = s.step.length ? s.step[s.step.length - 1] : -Infinity;
      const newer = keepNewer ? d.step.flatMap((step, i) => (step > last ? [[step, d.value[i], d.time[i]] as const] : [])) : [];
      d.step = s.step.slice();
      d.time = s.time ? s.time.slice() : s.step.map(() => NaN);
      d.value = s.value.slice();
      d.full = s.full;
      d.min = s.full || !s.min ? null : s.min.slice();
      d.max = s.full || !s.max ? null : s.max.slice();
      d.count = s.count;
      for (const [step, value, time] of newer) this.push(d, step, value, time);
      if (!this.zoomed && Number.isFinite(d.time[0])) this.t0 = Math.min(this.t0, d.time[0]);
    }
    this.render(true);
  }

  /** Append one live point; the redraw is batched to the next animation frame. `time` is
   * when it was logged (unix seconds), by default now. */
  append(key: string, step: number, value: number | null, run?: string, time = Date.now() / 1000): void {
    const d = this.data.find((x) => x.line.key === key && (run === undefined || x.line.run === undefined || x.line.run === run));
    if (!d) return;
    const n = d.step.length;
    if (n > 0 && step <= d.step[n - 1]) {
      // a step logged again (a restored run) replaces the newer tail
      let i = n;
      while (i > 0 && d.step[i - 1] >= step) i--;
      d.step.length = i;
      d.time.length = i;
      d.value.length = i;
      if (d.min && d.max) {
        d.min.length = i;
        d.max.length = i;
      }
    }
    this.push(d, step, value, time);
    this.schedule();
  }

  private push(d: LineData, step: number, value: number | null, time: number): void {
    d.step.push(step);
    d.time.push(time);
    d.value.push(value);
    if (d.min && d.max) {
      d.min.push(value);
      d.max.push(value);
    }
    d.count += 1;
    if (Number.isFinite(time) && !Number.isFinite(this.t0)) this.t0 = time;
  }

  setSmoothing(weight: number): void {
    this.smoothing = weight;
    this.render(false);
  }

  setLogY(logY: boolean): void {
    this.logY = logY;
    this.el.dataset.log = String(logY);
    this.render(true);
  }

  /** Change what the x axis shows. The caller loads the series again (time needs `x=time`). */
  setX(mode: XMode, tokens: TokenAxis | null = this.tokens): void {
    this.xMode = mode;
    this.tokens = tokens;
    this.el.dataset.x = mode;
    this.zoomed = null;
    delete this.el.dataset.zoomed;
    this.unzoom = true;
    this.render(true);
  }

  /** The tokens axis grew (a live point); redraw with it. */
  tokensChanged(): void {
    if (this.xMode === "tokens") this.schedule();
  }

  setFindings(findings: Finding[], redraw = true): void {
    const names = new Set(this.keys.flatMap((k) => [k, canonicalName(k)[0]]));
    const mine = findings.filter((f) => f.metrics.some((m) => names.has(m)) && f.first_step !== null);
    // what the markers show; a chart whose markers stay the same is not drawn again
    const shown = (list: Finding[]) => JSON.stringify(list.map((f) => [f.title, f.severity, f.first_step, f.last_step]));
    const same = shown(mine) === shown(this.findings);
    this.findings = mine;
    if (redraw && !same) this.render(false);
  }

  /** Zoom back out to the whole run (the full range is loaded again). */
  resetZoom(): void {
    this.chart.dispatchAction({ type: "dataZoom", start: 0, end: 100 });
  }

  /** Fit the chart to `width` x `height` pixels (its box's size); the same size draws nothing. */
  fit(width: number, height: number): void {
    if (width === this.chart.getWidth() && height === this.chart.getHeight()) return;
    this.chart.resize({ width, height });
  }

  /** The chart as drawn, as a PNG data URL on the card's background. */
  pngDataUrl(): string {
    return this.chart.getDataURL({ type: "png", pixelRatio: 2, backgroundColor: chartTheme().bg });
  }

  /** What the chart holds, one series per line (for export). */
  heldSeries(): TimedSeries[] {
    return this.data.map((d) => ({
      run: d.line.run ?? "",
      key: d.line.key,
      full: d.full,
      count: d.count,
      step: d.step,
      value: d.value,
      ...(d.time.some(Number.isFinite) ? { time: d.time } : {}),
      ...(d.min && d.max ? { min: d.min, max: d.max } : {}),
    }));
  }

  dispose(): void {
    window.clearTimeout(this.zoomTimer);
    this.stopTheme();
    this.chart.dispose();
  }

  private schedule(): void {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      this.render(false);
    });
  }

  private xs(d: LineData): (number | null)[] {
    switch (this.xMode) {
      case "step":
        return d.step;
      case "time":
        return d.time.map((t) => (Number.isFinite(t) ? t * 1000 : null));
      case "relative":
        return d.time.map((t) => (Number.isFinite(t) ? t - this.t0 : null));
      case "tokens": {
        const axis = this.tokens;
        return d.step.map((s) => (axis ? tokensAt(axis, s) : null));
      }
    }
  }

  /** The step range whose points lie in [xlo, xhi] on the x axis. */
  private stepRange(xlo: number, xhi: number): { lo: number; hi: number } {
    if (this.xMode === "step") return { lo: Math.floor(xlo), hi: Math.ceil(xhi) };
    let lo = Infinity;
    let hi = -Infinity;
    for (const d of this.data) {
      const xs = this.xs(d);
      for (let j = 0; j < xs.length; j++) {
        const x = xs[j];
        if (x === null) continue;
        // the points just outside the window count too, so a window between two points
        // still holds both
        if (x >= xlo || (j + 1 < xs.length && (xs[j + 1] ?? -Infinity) >= xlo)) lo = Math.min(lo, d.step[j]);
        if (x <= xhi || (j > 0 && (xs[j - 1] ?? Infinity) <= xhi)) hi = Math.max(hi, d.step[j]);
      }
    }
    return Number.isFinite(lo) && Number.isFinite(hi) && lo <= hi ? { lo, hi } : { lo: 0, hi: 0 };
  }

  /** Where `step` lies on the x axis (for finding markers): the nearest point's x. */
  private xAtStep(step: number): number | null {
    if (this.xMode === "step") return step;
    if (this.xMode === "tokens") return this.tokens ? tokensAt(this.tokens, step) : null;
    const d = this.data.reduce((a, b) => (b.step.length > a.step.length ? b : a), this.data[0]);
    if (!d || !d.step.length) return null;
    let best = 0;
    for (let j = 1; j < d.step.length; j++) if (Math.abs(d.step[j] - step) < Math.abs(d.step[best] - step)) best = j;
    return this.xs(d)[best];
  }

  private zoomChanged(): void {
    window.clearTimeout(this.zoomTimer);
    this.zoomTimer = window.setTimeout(() => {
      const opt = this.chart.getOption() as { dataZoom?: { start?: number; end?: number; startValue?: number; endValue?: number }[] };
      const z = opt.dataZoom?.[0];
      if (!z) return;
      if ((z.start ?? 0) <= 0 && (z.end ?? 100) >= 100) {
        this.zoomed = null;
        delete this.el.dataset.zoomed;
      } else if (z.startValue !== undefined && z.endValue !== undefined) {
        this.zoomed = this.stepRange(z.startValue, z.endValue);
        this.el.dataset.zoomed = `${this.zoomed.lo}-${this.zoomed.hi}`;
      }
      this.onZoom(this.zoomed);
    }, 250);
  }

  /** A label of the x axis; what ECharts asked for lands in data-x-labels (for tests). */
  private xLabel(v: number): string {
    let label: string;
    if (this.xMode === "step") label = Number.isInteger(v) ? String(v) : ""; // steps are whole
    else if (this.xMode === "relative") label = duration(v);
    else label = compact(v);
    if (label) {
      this.labelsSeen.add(label);
      if (!this.labelsPending) {
        this.labelsPending = true;
        requestAnimationFrame(() => {
          this.labelsPending = false;
          this.el.dataset.xLabels = [...this.labelsSeen].join("|");
          this.labelsSeen.clear();
        });
      }
    }
    return label;
  }

  /** The relative-time axis's tick step for the points held (the zoom window's, once loaded). */
  private relativeInterval(): number | undefined {
    let lo = Infinity;
    let hi = -Infinity;
    for (const d of this.data) {
      for (const x of this.xs(d)) {
        if (x === null) continue;
        lo = Math.min(lo, x);
        hi = Math.max(hi, x);
      }
    }
    return hi > lo ? durationInterval(hi - lo) : undefined;
  }

  /** The tooltip's first line: the point's step, and its x where the axis is not the step. */
  private tooltipHead(x: number | null, step: number): string {
    const s = `step ${step}`;
    if (x === null || this.xMode === "step") return s;
    if (this.xMode === "time") return `${new Date(x).toLocaleString()} · ${s}`;
    if (this.xMode === "relative") return `${duration(x)} · ${s}`;
    return `${Math.round(x).toLocaleString("en-US")} tokens · ${s}`;
  }

  private tooltip(params: unknown): string {
    const enc = echarts.format.encodeHTML;
    const list = (Array.isArray(params) ? params : [params]) as {
      seriesId: string;
      dataIndex: number;
      marker: string;
      value: number[]; // [x, y, step]
    }[];
    const rows = list.filter((p) => p.seriesId.startsWith("line-"));
    if (!rows.length) return "";
    const [x, , step] = rows[0].value;
    const out = [`<div class="chart-tip-head">${enc(this.tooltipHead(finite(x), step))}</div>`];
    for (const p of rows) {
      const d = this.data[Number(p.seriesId.slice(5))];
      const raw = d?.value[p.dataIndex];
      const shown = finite(p.value[1]);
      const value = typeof raw === "number" ? raw.toPrecision(5) : "—";
      const smoothed = typeof shown === "number" && shown !== raw ? ` <span class="chart-tip-smooth">(smoothed ${shown.toPrecision(5)})</span>` : "";
      const at = p.value[2] !== step ? ` <span class="chart-tip-smooth">at step ${p.value[2]}</span>` : "";
      out.push(`<div>${p.marker}${enc(d?.line.label ?? "")}: <b>${value}</b>${smoothed}${at}</div>`);
    }
    return out.join("");
  }

  private render(full: boolean): void {
    // axes must exist before any series update
    full = full || !this.initialized;
    this.initialized = true;
    const theme = chartTheme();
    const colors = lineColors(this.lines);
    const dashed = dashedLines(this.lines);
    const smoothed = smoothedLines(this.data.map((d) => d.step));
    const series: Record<string, unknown>[] = [];
    const layers: Under[] = [];
    let marked = false;
    this.data.forEach((d, i) => {
      const color = colors[i];
      const name = d.line.label;
      const xs = this.xs(d);
      const values = this.logY ? d.value.map((v) => (v !== null && v > 0 ? v : null)) : d.value;
      const smooth = smoothed[i] && this.smoothing > 0;
      const main = smooth ? ema(values, this.smoothing) : values;
      const sparse = d.step.length < MIN_SMOOTH_POINTS;
      // a line hidden from the legend hides what lies under it too; a chart of several runs
      // draws no bands (theirs would cover each other, and they cost the most to paint)
      const band = d.min && d.max && !this.logY && !this.lines.some((l) => l.run !== undefined);
      if ((band || smooth) && this.hidden[name] !== false) {
        layers.push({ color, xs, min: band ? d.min : null, max: band ? d.max : null, raw: smooth ? values : null });
      }
      series.push({
        type: "line", id: `line-${i}`, name, color,
        symbol: sparse ? "circle" : "none", symbolSize: 5, showSymbol: sparse,
        lineStyle: { width: smooth ? 2 : 1.5, type: dashed[i] ? "dashed" : "solid" }, dimensions: ["x", "y", "step"], encode: { x: 0, y: 1 }, data: points(xs, main, d.step),
        markArea: marked ? undefined : this.markArea(),
      });
      marked = true;
    });
    const under = underSeries(layers);
    // the same series id each time, so that a merge replaces it; drawn under the lines
    series.unshift(under ?? { type: "custom", id: "under", data: [], renderItem: () => null });
    const showLegend = this.legend || this.lines.length > 1;
    const option: Record<string, unknown> = { series };
    if (full) {
      // a new x axis starts unzoomed (setOption moves the window without a datazoom event)
      const zoomWindow = this.unzoom ? { start: 0, end: 100 } : {};
      this.unzoom = false;
      const axisStyle = {
        axisLine: { lineStyle: { color: theme.axis } },
        axisTick: { lineStyle: { color: theme.axis } },
        splitLine: { lineStyle: { color: theme.grid } },
        nameTextStyle: { color: theme.axis },
      };
      const xAxis: Record<string, unknown> = {
        ...axisStyle,
        name: X_LABELS[this.xMode],
        nameLocation: "middle",
        nameGap: 22,
        min: "dataMin",
        max: "dataMax",
        type: this.xMode === "time" ? "time" : "value",
        minInterval: this.xMode === "step" ? 1 : undefined,
        interval: this.xMode === "relative" ? this.relativeInterval() : undefined,
        // hideOverlap hides what overlaps; ECharts' own test of the end labels (each label
        // measured once more) is not needed beside it
        axisLabel: { color: theme.axis, hideOverlap: true, showMinLabel: true, showMaxLabel: true, ...(this.xMode === "time" ? {} : { formatter: (v: number) => this.xLabel(v) }) },
        axisPointer: { snap: true },
      };
      Object.assign(option, {
        animation: false,
        grid: { left: 64, right: 24, top: showLegend ? 30 : 12, bottom: 52 },
        legend: showLegend
          ? { type: "scroll", top: 0, data: this.lines.map((l) => l.label), textStyle: { color: theme.text }, inactiveColor: theme.grid }
          : { show: false },
        tooltip: {
          trigger: "axis",
          backgroundColor: theme.bg,
          borderColor: theme.grid,
          textStyle: { color: theme.text },
          className: "chart-tip",
          formatter: (p: unknown) => this.tooltip(p),
        },
        xAxis,
        yAxis: { ...axisStyle, type: this.logY ? "log" : "value", scale: true, axisLabel: { color: theme.axis, formatter: axisNumber, showMinLabel: true, showMaxLabel: true } },
        dataZoom: [
          { type: "inside", xAxisIndex: 0, filterMode: "none", ...zoomWindow },
          {
            // no copy of the data in the slider: the costliest part of drawing a chart
            type: "slider", xAxisIndex: 0, filterMode: "none", height: 14, bottom: 4, showDetail: false, ...zoomWindow,
            showDataShadow: false, brushSelect: false,
            borderColor: theme.grid, fillerColor: "rgba(128,128,128,0.15)",
            handleStyle: { color: theme.bg, borderColor: theme.axis },
            moveHandleStyle: { color: theme.grid },
          },
        ],
      });
    }
    this.chart.setOption(option, { replaceMerge: full ? ["series"] : [] });
    this.el.dataset.points = String(this.data[0]?.step.length ?? 0);
    this.el.dataset.counts = this.data.map((d) => `${d.line.key}=${d.step.length}`).join(";");
    this.el.dataset.full = this.data.every((d) => d.full) ? "true" : "false";
    this.el.dataset.markers = String(this.findings.length);
    this.el.dataset.legend = showLegend ? this.lines.map((l) => l.label).join("|") : "";
    this.el.dataset.colors = this.lines.map((l, i) => `${l.label}=${colors[i]}`).join("|");
    this.el.dataset.smoothed = this.data.filter((_, i) => smoothed[i] && this.smoothing > 0).map((d) => d.line.label).join("|");
  }

  private markArea(): Record<string, unknown> | undefined {
    if (!this.findings.length) return undefined;
    const data = this.findings.flatMap((f) => {
      const a = this.xAtStep(f.first_step ?? 0);
      const last = Math.max(f.last_step ?? f.first_step ?? 0, f.first_step ?? 0);
      let b = this.xAtStep(last);
      if (a === null || b === null) return [];
      if (this.xMode === "step") b = Math.max(b, a + 0.5);
      return [[{ name: f.title, xAxis: a, itemStyle: { color: SEVERITY_COLOR[f.severity] ?? SEVERITY_COLOR.info } }, { xAxis: b }]];
    });
    return { silent: false, data };
  }
}
