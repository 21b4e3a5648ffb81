// One uPlot chart: EMA line over a faint raw line, a min/max band where the server
// downsampled, zoom (wheel, drag, double click) that asks for full resolution, and live
// appends. The x axis is the step, the wall time, the time since the run's first point, or
// the tokens trained so far; a zoom is always turned into a step range for the server.
// uPlot draws what the canvas shows; the legend, the bands, the raw lines and the health
// markers are drawn by this file's hooks on the same canvas (so a PNG holds them too).

import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { canonicalName, type ResolvedLine } from "./chartspecs";
import { h } from "./dom";
import { MIN_SMOOTH_POINTS, ascending, axisLabels, compact, duration, durationInterval, ema, endTicks, finite, medianGap, nearest, smoothedLines, tokensAt, type TokenAxis } from "./chartmath";
import { chartTheme, cssVar, isDark, onThemeChange, withLightness, type ChartTheme } from "./theme";
import type { Finding, SeriesData } from "./types";

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
// On a chart of several runs each run has a style of its own: the palette's colours for the
// first 8 runs, then each colour a shade darker, then lighter (its HSL lightness moved by
// these, on a dark background the other way), and past those 24 the same colours in
// another dash: 72 runs before two look alike.
const RUN_SHADES = [0, -0.15, 0.15];
// A run's dashes per 24 runs: [its first line, its later lines (val, say)], in CSS pixels
// (solid, dashed; dotted, dash-dot; long dashes, dash-dot-dot).
const RUN_DASHES: [number[], number[]][] = [
  [[], [6, 4]],
  [[2, 3], [8, 3, 2, 3]],
  [[14, 4], [8, 3, 2, 3, 2, 3]],
];
// A legend's key is 16 pixels long: a line's dashes drawn shorter there, so a key shows one
// or two of them.
const LEGEND_DASH = 2 / 3;
const SEVERITY_COLOR: Record<string, string> = {
  critical: "rgba(220,38,38,0.15)",
  error: "rgba(220,38,38,0.15)",
  warning: "rgba(234,179,8,0.18)",
  info: "rgba(37,99,235,0.10)",
};
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

export interface ChartOptions {
  /** Show the legend even for one line (a chart whose lines are one of several, e.g. val only). */
  legend?: boolean;
  x?: XMode;
  tokens?: TokenAxis | null;
  /** A click on a point (not a drag) gives its step (the run page opens it in the History). */
  onPick?: (step: number) => void;
}

interface LineData {
  line: ResolvedLine;
  step: number[];
  time: number[]; // unix seconds; NaN where unknown
  value: (number | null)[];
  min: (number | null)[] | null;
  max: (number | null)[] | null;
  full: boolean;
  // the step of its first point: a downsampled line's first bucket is drawn after it
  first: number | null;
}

function colorOf(slot: number): string {
  const [name, fallback] = PALETTE[slot % PALETTE.length];
  return (name && cssVar(name)) || fallback;
}

/** The colour of the `i`th run of a chart of several runs (see RUN_SHADES). */
function runColor(i: number): string {
  const shade = RUN_SHADES[Math.floor(i / PALETTE.length) % RUN_SHADES.length];
  return shade ? withLightness(colorOf(i), isDark() ? -shade : shade) : colorOf(i);
}

/** The runs of a chart's lines, in the order their first lines come. */
function runsOf(lines: ResolvedLine[]): string[] {
  return [...new Set(lines.map((l) => l.run ?? ""))];
}

/**
 * Each line's colour: its own if given; on a chart of several runs, one colour per run (a
 * run's later lines are dashed, see `lineDashes`); else train and val fixed and the rest
 * the first colour free.
 */
function lineColors(lines: ResolvedLine[]): string[] {
  if (lines.some((l) => l.run !== undefined)) {
    const runs = runsOf(lines);
    return lines.map((l) => l.color ?? runColor(runs.indexOf(l.run ?? "")));
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

/**
 * Each line's dashes (empty: solid): on a chart of several runs, a run's first line and its
 * later ones (its val line, say) as RUN_DASHES has them for the run's place; else solid.
 */
function lineDashes(lines: ResolvedLine[]): number[][] {
  const runs = runsOf(lines);
  const seen = new Set<string>();
  return lines.map((l) => {
    if (l.run === undefined) return [];
    const [first, later] = RUN_DASHES[Math.floor(runs.indexOf(l.run) / (PALETTE.length * RUN_SHADES.length)) % RUN_DASHES.length];
    const again = seen.has(l.run);
    seen.add(l.run);
    return again ? later : first;
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

/** What a chart draws faintly under one line: its min/max band where the server
 * downsampled, and its raw values where the line is smoothed. */
interface Under {
  color: string;
  xs: (number | null)[];
  min: (number | null)[] | null;
  max: (number | null)[] | null;
  raw: (number | null)[] | null;
}

/** One line as drawn: its points that have an x, in x order (for the tooltip). */
interface DrawnLine {
  xs: number[];
  at: number[]; // each point's index in its LineData
  shown: (number | null)[]; // the value drawn (smoothed where the line is)
}

/** A finding's shaded x range. */
interface Mark {
  a: number;
  b: number;
  color: string;
  title: string;
}

/** A legend entry's box on the canvas, in CSS pixels (a click toggles its line). */
interface LegendEntry {
  line: number;
  x: number;
  row: number;
  w: number;
}

interface LegendHit {
  x0: number;
  x1: number;
  y0: number;
  y1: number;
  line: number;
}

const FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";
const LEFT = 64; // the y axis's width: the plot starts here
const RIGHT = 24;
const LEGEND_ROW = 20;
const PICK_WAIT_MS = 300; // a click on a point waits this long for a second click (a double click)
const LEGEND_ROWS = 3; // the most rows a legend takes; the rest are summed up as "+N more"
const WHEEL_STEP = 0.8; // the window's span after one wheel notch in (120 units)
// The tick steps of the step axis: whole steps, 1, 2 and 5 a decade, through the decade
// past the largest step a run can log (2**63 - 1, rundir/format.py MAX_STEP), so that any
// span of steps on any chart's width has one (a span with none is drawn with no tick).
const STEP_INCRS: number[] = [];
for (let decade = 1; decade / 10 < 2 ** 63; decade *= 10) STEP_INCRS.push(decade, 2 * decade, 5 * decade);

// Label widths by font: measured once on one canvas of the page's, not per chart (each new
// canvas context resolves the font again before its first measure).
const WIDTHS = new Map<string, number>();
let measurer: CanvasRenderingContext2D | null = null;

/** The width of `text` drawn in `font`, in CSS pixels. */
function textWidth(text: string, font: string): number {
  const id = `${font}\n${text}`;
  let w = WIDTHS.get(id);
  if (w === undefined) {
    measurer ??= document.createElement("canvas").getContext("2d") as CanvasRenderingContext2D;
    if (measurer.font !== font) measurer.font = font;
    w = measurer.measureText(text).width;
    WIDTHS.set(id, w);
  }
  return w;
}

/** `text` cut with an ellipsis to fit `width` pixels (whole when it fits). */
function fitText(text: string, font: string, width: number): string {
  if (textWidth(text, font) <= width) return text;
  let lo = 0;
  let hi = text.length;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (textWidth(`${text.slice(0, mid)}…`, font) <= width) lo = mid;
    else hi = mid - 1;
  }
  return `${text.slice(0, lo)}…`;
}

/**
 * The lines as uPlot's aligned table: one x column, the union of every line's x, and a
 * column per line, undefined where the line has no point at that x (uPlot joins over it),
 * null where its value is missing (a gap).
 */
function aligned(lines: DrawnLine[]): uPlot.AlignedData {
  if (lines.length === 1 || lines.every((l) => l.xs.length === lines[0].xs.length && l.xs.every((x, i) => x === lines[0].xs[i]))) {
    const xs = lines[0]?.xs ?? [];
    return [xs, ...lines.map((l) => l.shown)];
  }
  const all = new Float64Array(lines.reduce((n, l) => n + l.xs.length, 0));
  let n = 0;
  for (const l of lines) for (const x of l.xs) all[n++] = x;
  all.sort();
  const xs: number[] = [];
  for (const x of all) if (xs.length === 0 || x !== xs[xs.length - 1]) xs.push(x);
  const columns = lines.map((l) => {
    const col: (number | null | undefined)[] = new Array(xs.length);
    let k = 0;
    l.xs.forEach((x, i) => {
      while (xs[k] < x) k++;
      col[k] = l.shown[i];
    });
    return col;
  });
  return [xs, ...columns];
}

/**
 * A value's canvas position on `u`'s scale `key` (as u.valToPos(v, key, true), without its
 * cost per call): `start` where the scale begins, plus `span` over its whole range.
 */
function toCanvas(u: uPlot, key: string, start: number, span: number): (v: number) => number {
  const sc = u.scales[key];
  const log = sc.distr === 3;
  const f = (v: number) => (log ? Math.log10(v) : v);
  const lo = f(sc.min ?? 0);
  const k = span / (f(sc.max ?? 1) - lo);
  return (v) => start + (f(v) - lo) * k;
}

// uPlot's own line paths: they thin a line of more points than 4 a pixel to each pixel's
// first, last, lowest and highest (linePaths below draws every point)
const thinnedPaths = (uPlot.paths.linear as uPlot.Series.LinearPathBuilderFactory)();

/** The canvas x of each value of a chart's x column, worked out once a draw for all its
 * lines (uPlot's own paths work it out again for each line, each point through closures). */
interface XPixels {
  xs: uPlot.AlignedData[0];
  lo: number;
  k: number;
  start: number;
  px: Float64Array;
}

function xPixels(u: uPlot, last: XPixels | null): XPixels {
  const sc = u.scales.x;
  const lo = sc.min ?? 0;
  const start = u.bbox.left;
  const k = u.bbox.width / ((sc.max ?? 1) - lo);
  const xs = u.data[0];
  if (last && last.xs === xs && last.lo === lo && last.k === k && last.start === start) return last;
  const px = new Float64Array(xs.length);
  for (let i = 0; i < xs.length; i++) px[i] = Math.round(start + (xs[i] - lo) * k);
  return { xs, lo, k, start, px };
}

export class ChartView {
  readonly el: HTMLElement;
  private u: uPlot | null = null;
  private data: LineData[];
  private smoothing: number;
  private findings: Finding[] = [];
  private pending = false;
  private frame = 0; // the animation frame a render waits for
  private disposed = false;
  // held back (`defer`): its data is kept, and nothing is prepared or drawn until `reveal`
  private deferred = false;
  private zoomTimer: number | undefined;
  private xMode: XMode;
  private tokens: TokenAxis | null;
  private readonly legend: boolean;
  private t0 = Infinity; // the first point's time, where relative time counts from
  // the labels uPlot drew last on each axis, for data-x-labels and data-y-labels (tests)
  private labels: { x: string[]; y: string[] } = { x: [], y: [] };
  private labelsPending = false;
  private stopTheme: () => void;
  private hidden = new Set<number>(); // lines hidden from the legend
  private size = { width: 0, height: 0 };
  private tip: HTMLElement;
  private tipStep: number | null = null; // the step of the point the tooltip names
  private readonly onPick: ((step: number) => void) | null;
  // what the last render drew (the hooks and the tooltip read it)
  private drawn: DrawnLine[] = [];
  private table: uPlot.AlignedData = [[]];
  private colors: string[] = [];
  private dashes: number[][] = [];
  private smooth: boolean[] = [];
  private layers: Under[] = [];
  private marks: Mark[] = [];
  private legendHits: LegendHit[] = [];
  private legendCache: { id: string; entries: LegendEntry[] } | null = null;
  private legendRecorded: LegendEntry[] | null = null;
  private extent: { min: number; max: number } | null = null; // the x range of the whole run
  private window: { min: number; max: number } | null = null; // the x range zoomed to
  private minSpan = 0;
  private xPx: XPixels | null = null; // the x column's canvas positions at the last draw
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
    this.onPick = options.onPick ?? null;
    this.data = lines.map((line) => ({ line, step: [], time: [], value: [], min: null, max: null, full: true, first: null }));
    this.tip = h("div", { class: "chart-tip", hidden: "" });
    el.appendChild(this.tip);
    this.stopTheme = onThemeChange(() => this.rebuild());
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
      d.first = s.first_step ?? (s.step.length ? s.step[0] : null);
      d.min = s.full || !s.min ? null : s.min.slice();
      d.max = s.full || !s.max ? null : s.max.slice();
      for (const [step, value, time] of newer) this.push(d, step, value, time);
      if (!this.zoomed && Number.isFinite(d.time[0])) this.t0 = Math.min(this.t0, d.time[0]);
    }
    this.render();
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
    if (d.first === null || step < d.first) d.first = step;
    d.step.push(step);
    d.time.push(time);
    d.value.push(value);
    if (d.min && d.max) {
      d.min.push(value);
      d.max.push(value);
    }
    if (Number.isFinite(time) && !Number.isFinite(this.t0)) this.t0 = time;
  }

  setSmoothing(weight: number): void {
    this.smoothing = weight;
    this.render();
  }

  setLogY(logY: boolean): void {
    this.logY = logY;
    this.el.dataset.log = String(logY);
    this.rebuild();
  }

  /** Change what the x axis shows. The caller loads the series again (time needs `x=time`). */
  setX(mode: XMode, tokens: TokenAxis | null = this.tokens): void {
    this.xMode = mode;
    this.tokens = tokens;
    this.el.dataset.x = mode;
    this.zoomed = null;
    this.window = null;
    this.extent = null;
    window.clearTimeout(this.zoomTimer);
    delete this.el.dataset.zoomed;
    this.rebuild();
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
    if (redraw && !same) this.render();
  }

  /** Zoom back out to the whole run (the full range is loaded again). */
  resetZoom(): void {
    this.window = null;
    if (this.u && this.extent) this.u.setScale("x", { ...this.extent });
    this.zoomChanged();
  }

  /**
   * Hold the chart back: its series, live points and settings are kept but nothing is
   * prepared or drawn (no uPlot is made) until `reveal` — for a chart out of the window
   * while the ones in it are drawn first. A chart already drawn is not held back.
   */
  defer(): void {
    if (!this.u) this.deferred = true;
  }

  /** Draw a chart held back by `defer`, with what it was given meanwhile. */
  reveal(): void {
    if (!this.deferred) return;
    this.deferred = false;
    this.render();
  }

  /** Whether the chart is held back by `defer` (not drawn yet). */
  get held(): boolean {
    return this.deferred;
  }

  /** Fit the chart to `width` x `height` pixels (its box's size); the same size draws nothing. */
  fit(width: number, height: number): void {
    if (width === this.size.width && height === this.size.height) return;
    this.size = { width, height };
    this.u?.setSize(this.size);
  }

  /** The chart as drawn, legend included, at twice the screen's pixel ratio, as a PNG data
   * URL on the card's background: drawn again by a second uPlot at twice the size, over the
   * x range the page shows (zoomed or not). */
  pngDataUrl(): string {
    this.reveal();
    const k = 2;
    const shown = this.u?.scales.x;
    const box = document.createElement("div");
    const u = new uPlot(this.options(k, false), this.table, box);
    // drawn now, not in uPlot's microtask; a chart just revealed has no x range yet, and
    // the new one's own (the data's) is the same. (A redraw() here set the x scale to the
    // new uPlot's, still unset: from -1 to 1.)
    u.batch(() => {
      if (shown?.min != null && shown.max != null) u.setScale("x", { min: shown.min, max: shown.max });
    });
    const out = document.createElement("canvas");
    out.width = u.ctx.canvas.width;
    out.height = u.ctx.canvas.height;
    const ctx = out.getContext("2d") as CanvasRenderingContext2D;
    ctx.fillStyle = chartTheme().bg;
    ctx.fillRect(0, 0, out.width, out.height);
    ctx.drawImage(u.ctx.canvas, 0, 0);
    u.destroy();
    return out.toDataURL("image/png");
  }

  dispose(): void {
    this.disposed = true;
    cancelAnimationFrame(this.frame);
    window.clearTimeout(this.zoomTimer);
    this.stopTheme();
    this.u?.destroy();
    this.u = null;
    this.tip.remove();
  }

  private schedule(): void {
    if (this.pending) return;
    this.pending = true;
    this.frame = requestAnimationFrame(() => {
      this.pending = false;
      this.render();
    });
  }

  private xs(d: LineData): (number | null)[] {
    switch (this.xMode) {
      case "step":
        return d.step;
      case "time":
        return d.time.map((t) => (Number.isFinite(t) ? t : null));
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

  /** Where the chart's first logged point lies on the x axis: a downsampled line draws its
   * first bucket at that bucket's last step, and every chart of a run starts at its first. */
  private firstX(): number | null {
    const firsts = this.data.flatMap((d) => (d.first === null ? [] : [d.first]));
    return firsts.length ? this.xAtStep(Math.min(...firsts)) : null;
  }

  /** The x scale's range for uPlot: the whole run from its first logged point (not only
   * the points drawn) unless zoomed, and a span around a single value. */
  private xRange(min: number, max: number): uPlot.Range.MinMax {
    if (!this.window && this.extent) min = Math.min(min, this.extent.min);
    return min === max ? [min - 1, max + 1] : [min, max];
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

  /** Show the x range [min, max]: the whole run's or narrower (a zoom). */
  private zoomTo(min: number, max: number): void {
    const ext = this.extent;
    if (!this.u || !ext || !(max > min)) return;
    if (max - min < this.minSpan) {
      const mid = (min + max) / 2;
      min = mid - this.minSpan / 2;
      max = mid + this.minSpan / 2;
    }
    if (max - min >= ext.max - ext.min) {
      // out to the whole run: nothing to read again when it shows that already
      if (this.window || this.zoomed) this.resetZoom();
      return;
    }
    // slid back inside the run
    if (min < ext.min) [min, max] = [ext.min, ext.min + (max - min)];
    if (max > ext.max) [min, max] = [ext.max - (max - min), ext.max];
    this.window = { min, max };
    this.u.setScale("x", { min, max });
    this.zoomChanged();
  }

  /** Once the zoom rests, the step range it shows is asked of the server. */
  private zoomChanged(): void {
    window.clearTimeout(this.zoomTimer);
    this.zoomTimer = window.setTimeout(() => {
      if (!this.window) {
        this.zoomed = null;
        delete this.el.dataset.zoomed;
      } else {
        this.zoomed = this.stepRange(this.window.min, this.window.max);
        this.el.dataset.zoomed = `${this.zoomed.lo}-${this.zoomed.hi}`;
      }
      this.onZoom(this.zoomed);
    }, 250);
  }

  private wheel(e: WheelEvent): void {
    const u = this.u;
    if (!u || !this.extent) return;
    e.preventDefault();
    const { min, max } = u.scales.x;
    if (min === undefined || max === undefined) return;
    const rect = u.over.getBoundingClientRect();
    const sideways = e.shiftKey ? e.deltaY || e.deltaX : Math.abs(e.deltaX) > Math.abs(e.deltaY) ? e.deltaX : 0;
    if (sideways) {
      // a sideways scroll (or shift and the wheel) moves a zoomed window along the run
      if (!this.window) return;
      const shift = (sideways / rect.width) * (max - min);
      this.zoomTo(min + shift, max + shift);
      return;
    }
    const frac = Math.min(Math.max((e.clientX - rect.left) / rect.width, 0), 1);
    const at = min + frac * (max - min);
    const factor = Math.min(Math.max(WHEEL_STEP ** (-e.deltaY / 120), 0.2), 5);
    const span = (max - min) * factor;
    this.zoomTo(at - frac * span, at - frac * span + span);
  }

  /** A label of the x axis; what uPlot drew last lands in data-x-labels (for tests). */
  private xLabels(splits: number[], record: boolean): string[] {
    const labels = splits.map((v: number | null) => {
      if (v === null) return "";
      if (this.xMode === "step") return Number.isInteger(v) ? String(v) : ""; // steps are whole
      if (this.xMode === "relative") return duration(v);
      return compact(v);
    });
    if (record) this.record("x", labels);
    return labels;
  }

  /** Keep the labels drawn on `axis`; the data attribute follows once a frame. */
  private record(axis: "x" | "y", labels: string[]): void {
    this.labels[axis] = labels.filter(Boolean);
    if (this.labelsPending) return;
    this.labelsPending = true;
    requestAnimationFrame(() => {
      this.labelsPending = false;
      this.el.dataset.xLabels = this.labels.x.join("|");
      this.el.dataset.yLabels = this.labels.y.join("|");
    });
  }

  /** The tooltip's first line: the point's step, and its x where the axis is not the step. */
  private tooltipHead(x: number | null, step: number): string {
    const s = `step ${step}`;
    if (x === null || this.xMode === "step") return s;
    if (this.xMode === "time") return `${new Date(x * 1000).toLocaleString()} · ${s}`;
    if (this.xMode === "relative") return `${duration(x)} · ${s}`;
    return `${Math.round(x).toLocaleString("en-US")} tokens · ${s}`;
  }

  /** The tooltip for the cursor at `left` CSS pixels into the plot: each shown line's
   * point nearest it, and the findings whose range holds it. */
  private showTip(u: uPlot): void {
    const left = u.cursor.left ?? -1;
    const top = u.cursor.top ?? 0;
    this.tipStep = null;
    if (left < 0 || !this.drawn.length) {
      if (!this.tip.hidden) this.tip.hidden = true;
      return;
    }
    const x = u.posToVal(left, "x");
    const rows: HTMLElement[] = [];
    let head: HTMLElement | undefined;
    let headStep = 0;
    this.drawn.forEach((l, i) => {
      if (this.hidden.has(i) || !l.xs.length) return;
      const k = nearest(l.xs, x);
      const d = this.data[i];
      const j = l.at[k];
      if (!head) {
        headStep = d.step[j];
        head = h("div", { class: "chart-tip-head" }, this.tooltipHead(l.xs[k], headStep));
      }
      const raw = d.value[j];
      const shown = finite(l.shown[k]);
      const dot = h("span", { class: "chart-tip-dot", style: `background: ${this.colors[i]}` });
      // a point whose value is null was logged as a NaN or an infinity (the API sends both
      // as null); a step never logged has no point
      const row = h("div", {}, dot, `${d.line.label}: `, h("b", {}, typeof raw === "number" ? raw.toPrecision(5) : "non-finite"));
      if (shown !== null && shown !== raw) row.append(" ", h("span", { class: "chart-tip-smooth" }, `(smoothed ${shown.toPrecision(5)})`));
      if (d.step[j] !== headStep) row.append(" ", h("span", { class: "chart-tip-smooth" }, `at step ${d.step[j]}`));
      rows.push(row);
    });
    if (!head) {
      this.tip.hidden = true;
      return;
    }
    const marks = this.marks.filter((m) => m.a <= x && x <= m.b).map((m) => h("div", { class: "chart-tip-mark" }, m.title));
    this.tipStep = headStep;
    const hint = this.onPick ? h("div", { class: "chart-tip-hint" }, `Click: step ${headStep} in the History`) : null;
    this.tip.replaceChildren(head, ...rows, ...marks, ...(hint ? [hint] : []));
    this.tip.hidden = false;
    // beside the cursor, on the side with room
    const plotLeft = u.bbox.left / uPlot.pxRatio;
    const plotTop = u.bbox.top / uPlot.pxRatio;
    const w = this.tip.offsetWidth;
    let tx = plotLeft + left + 14;
    if (tx + w > this.el.clientWidth) tx = Math.max(0, plotLeft + left - 14 - w);
    this.tip.style.left = `${tx}px`;
    this.tip.style.top = `${Math.max(0, plotTop + top - this.tip.offsetHeight / 2)}px`;
  }

  /** The legend entry under the mouse, if any ("+N more" has a negative line). */
  private legendHit(e: MouseEvent): LegendHit | undefined {
    const u = this.u;
    if (!u) return undefined;
    const rect = u.ctx.canvas.getBoundingClientRect();
    const x = e.clientX - rect.left;
    const y = e.clientY - rect.top;
    return this.legendHits.find((b) => x >= b.x0 && x <= b.x1 && y >= b.y0 && y <= b.y1);
  }

  /** Over a legend entry, its line's whole name and what a click does; over "+N more",
   * the names of the lines it stands for (the canvas shows neither). */
  private legendHover(e: MouseEvent): void {
    const u = this.u;
    if (!u) return;
    const hit = this.legendHit(e);
    let title = "";
    if (hit && hit.line >= 0) {
      title = `${this.lines[hit.line].label}\n(click to ${this.hidden.has(hit.line) ? "show" : "hide"} this line)`;
    } else if (hit) {
      title = this.lines.slice(this.lines.length + hit.line).map((l) => l.label).join("\n");
    }
    if (title) u.root.title = title;
    else u.root.removeAttribute("title");
    u.root.style.cursor = hit && hit.line >= 0 ? "pointer" : "";
  }

  /** A click on a legend entry hides its line, or shows it again. */
  private legendClick(e: MouseEvent): void {
    const u = this.u;
    if (!u) return;
    const hit = this.legendHit(e);
    if (!hit || hit.line < 0) return;
    if (this.hidden.has(hit.line)) this.hidden.delete(hit.line);
    else this.hidden.add(hit.line);
    u.setSeries(hit.line + 1, { show: !this.hidden.has(hit.line) });
    this.render();
  }

  private get showLegend(): boolean {
    return this.legend || this.lines.length > 1;
  }

  /**
   * The legend's entries laid out in centred rows `width` CSS pixels wide, at `k` times the
   * size; past LEGEND_ROWS rows one entry with line -N says "+N more", at the end of the
   * last row (all of the legend's rows lie above the plot, clear of the y axis's top label).
   */
  private legendLayout(width: number, k: number): LegendEntry[] {
    // uPlot asks for the padding (so the rows) a few times a draw: the labels are measured once
    const id = `${width}/${k}`;
    if (this.legendCache?.id === id) return this.legendCache.entries;
    const entries = this.layoutLegend(width, k);
    this.legendCache = { id, entries };
    return entries;
  }

  private layoutLegend(width: number, k: number): LegendEntry[] {
    const font = `${12 * k}px ${FONT}`;
    const room = width - 16 * k;
    const gap = 12 * k;
    const rows: { line: number; w: number }[][] = [[]];
    let used = 0;
    let placed = 0;
    // the labels past the rows shown are not measured: "+N more" counts them
    for (let i = 0; i < this.lines.length; i++) {
      // a label longer than the row is cut to it (its whole name is the entry's tooltip)
      const w = Math.min(room, 22 * k + textWidth(this.lines[i].label, font));
      if (used + w > room && rows[rows.length - 1].length) {
        if (rows.length === LEGEND_ROWS) break;
        rows.push([]);
        used = 0;
      }
      rows[rows.length - 1].push({ line: i, w });
      used += w + gap;
      placed++;
    }
    // "+N more" ends the last row: its entries that leave it no room count among the N
    const last = rows[rows.length - 1];
    const span = (row: { w: number }[]) => row.reduce((n, e) => n + e.w, 0) + gap * Math.max(0, row.length - 1);
    let more: { line: number; w: number } | null = null;
    while (placed < this.lines.length) {
      more = { line: placed - this.lines.length, w: textWidth(`+${this.lines.length - placed} more`, font) };
      if (!last.length || span(last) + gap + more.w <= room) break;
      last.pop();
      placed--;
    }
    if (more) last.push(more);
    const out: LegendEntry[] = [];
    rows.forEach((row, r) => {
      let x = Math.max(0, (width - span(row)) / 2);
      for (const e of row) {
        out.push({ line: e.line, x, row: r, w: e.w });
        x += e.w + gap;
      }
    });
    return out;
  }

  /** The rows the legend takes on `u` at `k` times the size. */
  private legendRows(u: uPlot, k: number): number {
    if (!this.showLegend) return 0;
    const rows = this.legendLayout(u.width, k).map((e) => e.row);
    return Math.min(LEGEND_ROWS, Math.max(0, ...rows) + 1);
  }

  private drawLegend(u: uPlot, k: number, theme: ChartTheme): void {
    const r = uPlot.pxRatio * k;
    const ctx = u.ctx;
    const layout = this.legendLayout(u.width, k);
    ctx.save();
    ctx.font = `${12 * r}px ${FONT}`;
    ctx.textAlign = "left";
    ctx.textBaseline = "middle";
    const hits: LegendHit[] = [];
    for (const e of layout) {
      const y = (4 + LEGEND_ROW * e.row + LEGEND_ROW / 2) * r;
      if (e.line < 0) {
        ctx.fillStyle = theme.axis;
        ctx.fillText(`+${-e.line} more`, e.x * uPlot.pxRatio, y);
        hits.push({ x0: e.x / k, x1: (e.x + e.w) / k, y0: LEGEND_ROW * e.row, y1: LEGEND_ROW * (e.row + 1) + 4, line: e.line });
        continue;
      }
      const off = this.hidden.has(e.line);
      const color = off ? theme.grid : this.colors[e.line];
      ctx.strokeStyle = color;
      ctx.lineWidth = 3 * r;
      ctx.setLineDash(this.dashes[e.line].map((d) => d * LEGEND_DASH * r));
      ctx.beginPath();
      ctx.moveTo(e.x * uPlot.pxRatio, y);
      ctx.lineTo((e.x + 16 * k) * uPlot.pxRatio, y);
      ctx.stroke();
      ctx.fillStyle = off ? theme.grid : theme.text;
      ctx.fillText(fitText(this.lines[e.line].label, `${12 * k}px ${FONT}`, e.w - 22 * k), (e.x + 22 * k) * uPlot.pxRatio, y);
      hits.push({ x0: e.x / k, x1: (e.x + e.w) / k, y0: LEGEND_ROW * e.row, y1: LEGEND_ROW * (e.row + 1) + 4, line: e.line });
    }
    ctx.restore();
    if (k === 1) {
      this.legendHits = hits;
      this.recordLegend(layout);
    }
  }

  /** The boxes of the legend's entries (data-legend-boxes) and of its "+N more"
   * (data-legend-more), "left,top,right,bottom" in CSS pixels on the canvas, for tests. */
  private recordLegend(layout: LegendEntry[]): void {
    if (layout === this.legendRecorded) return;
    this.legendRecorded = layout;
    const box = (e: LegendEntry) => [e.x, 4 + LEGEND_ROW * e.row, e.x + e.w, 4 + LEGEND_ROW * (e.row + 1)].map((v) => Math.round(v * 10) / 10).join(",");
    this.el.dataset.legendBoxes = layout.filter((e) => e.line >= 0).map(box).join("|");
    const more = layout.find((e) => e.line < 0);
    if (more) this.el.dataset.legendMore = box(more);
    else delete this.el.dataset.legendMore;
  }

  /** The findings' shading, then each line's band and raw line, under the lines. */
  private drawUnder(u: uPlot, k: number): void {
    const ctx = u.ctx;
    const { left, top, width, height } = u.bbox;
    ctx.save();
    ctx.beginPath();
    ctx.rect(left, top, width, height);
    ctx.clip();
    for (const m of this.marks) {
      const a = u.valToPos(m.a, "x", true);
      const b = u.valToPos(m.b, "x", true);
      ctx.fillStyle = m.color;
      ctx.fillRect(a, top, Math.max(b - a, 1), height);
    }
    const x = toCanvas(u, "x", left, width);
    const y = toCanvas(u, "y", top + height, -height);
    for (const { color, xs, min, max, raw } of this.layers) {
      if (min && max) {
        ctx.beginPath();
        const back: [number, number][] = [];
        let first = true;
        for (let j = 0; j < xs.length; j++) {
          const xj = xs[j];
          const lo = min[j];
          const hi = max[j];
          if (xj === null || lo === null || hi === null) continue;
          if (first) ctx.moveTo(x(xj), y(hi));
          else ctx.lineTo(x(xj), y(hi));
          first = false;
          back.push([x(xj), y(lo)]);
        }
        for (let j = back.length - 1; j >= 0; j--) ctx.lineTo(back[j][0], back[j][1]);
        ctx.closePath();
        ctx.globalAlpha = 0.15;
        ctx.fillStyle = color;
        ctx.fill();
      }
      if (raw) {
        ctx.globalAlpha = 0.25;
        ctx.strokeStyle = color;
        ctx.lineWidth = uPlot.pxRatio * k;
        ctx.beginPath();
        let open = false;
        for (let j = 0; j < xs.length; j++) {
          const xj = xs[j];
          const v = raw[j];
          if (xj === null || v === null || !Number.isFinite(v)) {
            open = false;
            continue;
          }
          if (open) ctx.lineTo(x(xj), y(v));
          else ctx.moveTo(x(xj), y(v));
          open = true;
        }
        ctx.stroke();
      }
      ctx.globalAlpha = 1;
    }
    ctx.restore();
  }

  /** The y range: the shown lines' in the x window, the bands' and raw lines' too. */
  private yRange(u: uPlot, dataMin: number | null, dataMax: number | null): uPlot.Range.MinMax {
    let lo = dataMin ?? Infinity;
    let hi = dataMax ?? -Infinity;
    const x0 = u.series[0].min ?? -Infinity;
    const x1 = u.series[0].max ?? Infinity;
    const take = (v: number | null | undefined): void => {
      if (v === null || v === undefined || !Number.isFinite(v) || (this.logY && v <= 0)) return;
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    };
    for (const { xs, min, max, raw } of this.layers) {
      for (let j = 0; j < xs.length; j++) {
        const x = xs[j];
        if (x === null || x < x0 || x > x1) continue;
        if (min && max) {
          take(min[j]);
          take(max[j]);
        }
        if (raw) take(raw[j]);
      }
    }
    if (!(lo <= hi)) return this.logY ? [1, 10] : [0, 1];
    if (this.logY) {
      // a constant line at a power of ten (a learning rate of 1e-3) is a range of one value,
      // on which uPlot draws nothing: a decade either side of it instead
      const [min, max] = uPlot.rangeLog(lo, hi, 10, true);
      return min !== null && max !== null && max > min ? [min, max] : uPlot.rangeLog(lo / 10, hi * 10, 10, true);
    }
    return uPlot.rangeNum(lo, hi, 0.1, true);
  }

  /**
   * A line's path as uPlot's own (linear, rounded to whole pixels, broken at a null, joined
   * over an undefined: a line with no point at that x) with the x positions shared by the
   * chart's lines and no closure per point: a chart of 10 runs draws 20 lines of ~400 points.
   * A line of more points than 4 a pixel is left to uPlot's, which thins it.
   */
  private readonly linePaths: uPlot.Series.PathBuilder = (u, si, i0, i1) => {
    const { top, width, height } = u.bbox;
    if (i1 - i0 >= width * 4) return thinnedPaths(u, si, i0, i1);
    const xp = (this.xPx = xPixels(u, this.xPx)).px;
    const ys = u.data[si];
    const sc = u.scales.y;
    const log = sc.distr === 3;
    const f = (v: number) => (log ? Math.log10(v) : v);
    const lo = f(sc.min ?? 0);
    const k = -height / (f(sc.max ?? 1) - lo);
    const base = top + height;
    const stroke = new Path2D();
    let open = false;
    for (let i = i0; i <= i1; i++) {
      const v = ys[i];
      if (v === undefined) continue;
      if (v === null) {
        open = false;
        continue;
      }
      const y = Math.round(base + ((log ? Math.log10(v) : v) - lo) * k);
      if (open) stroke.lineTo(xp[i], y);
      else stroke.moveTo(xp[i], y);
      open = true;
    }
    return { stroke, fill: null, clip: null, band: null, flags: 0 };
  };

  /** uPlot's options for drawing at `k` times the size (1 on the page, 2 for a PNG). */
  private options(k: number, live: boolean): uPlot.Options {
    const theme = chartTheme();
    const font = `${11 * k}px ${FONT}`;
    const mode = this.xMode;
    const grid = { stroke: theme.grid, width: k };
    const ticks = { stroke: theme.axis, width: k, size: 4 * k };
    const border = { show: true, stroke: theme.axis, width: k };
    const xAxis: uPlot.Axis = {
      scale: "x", stroke: theme.axis, font, labelFont: font, label: X_LABELS[mode], labelSize: 16 * k, labelGap: 0,
      size: 30 * k, gap: 4 * k, grid, ticks, border, space: 60 * k,
    };
    if (mode !== "time") {
      xAxis.values = (_u, splits) => this.xLabels(splits, live);
      xAxis.splits = (_u, _i, min, max, incr) => endTicks(min, max, incr);
    }
    if (mode === "step") {
      xAxis.incrs = STEP_INCRS;
      // a step of 13 digits (10**12) is wider than the usual space between ticks
      xAxis.space = (_u, _i, _min, max) => Math.max(60 * k, textWidth(String(Math.round(max)), font) + 16 * k);
    }
    if (mode === "relative") xAxis.incrs = (_u, _i, min, max) => [durationInterval(max - min)];
    const yAxis: uPlot.Axis = {
      scale: "y", stroke: theme.axis, font, size: LEFT * k, gap: 4 * k, grid, ticks, border, space: 30 * k,
      // uPlot leaves null in `splits` where a log axis skips a tick
      values: (_u, splits) => {
        const labels = axisLabels(splits);
        if (live) this.record("y", labels);
        return labels;
      },
    };
    const series: uPlot.Series[] = [{}];
    this.lines.forEach((l, i) => {
      series.push({
        label: l.label,
        scale: "y",
        show: !this.hidden.has(i),
        stroke: () => this.colors[i],
        width: this.lineWidth * k,
        dash: this.dashes[i].length ? this.dashes[i].map((d) => d * k) : undefined,
        paths: this.linePaths,
        points: { show: () => (this.data[i]?.step.length ?? 0) < MIN_SMOOTH_POINTS, size: 5 * k, fill: () => this.colors[i], stroke: () => this.colors[i] },
      });
    });
    const top = (u: uPlot) => (this.showLegend ? 10 + LEGEND_ROW * this.legendRows(u, k) : 12) * k;
    return {
      width: this.size.width * k,
      height: this.size.height * k,
      padding: [top, RIGHT * k, 0, 0],
      legend: { show: false },
      series,
      scales: {
        x: { time: mode === "time", range: (_u, min, max) => this.xRange(min, max) },
        y: { distr: this.logY ? 3 : 1, range: (u, min, max) => this.yRange(u, min, max) },
      },
      axes: [xAxis, yAxis],
      cursor: live
        ? {
            y: false,
            points: { show: false },
            drag: { x: true, y: false, setScale: false },
            // a double click on a chart that is not zoomed reads nothing again
            bind: { dblclick: () => () => ((this.window || this.zoomed) && this.resetZoom(), null) },
          }
        : { show: false },
      select: { show: live, left: 0, top: 0, width: 0, height: 0 },
      hooks: {
        drawAxes: [(u) => this.drawUnder(u, k)],
        draw: [(u) => this.showLegend && this.drawLegend(u, k, theme)],
        ...(live
          ? {
              setCursor: [(u: uPlot) => this.showTip(u)],
              setSelect: [
                (u: uPlot) => {
                  const { left, width } = u.select;
                  if (width > 2) this.zoomTo(u.posToVal(left, "x"), u.posToVal(left + width, "x"));
                  u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
                },
              ],
            }
          : {}),
      },
    };
  }

  /**
   * A line's width in CSS pixels: 2, and 1 on a chart of several runs. A canvas without a
   * GPU paints a 1-pixel line several times faster than a 2-pixel one, and a width between
   * (1.5) many times slower than either; a chart of 10 runs' lines took most of a second.
   */
  private get lineWidth(): number {
    return this.lines.some((l) => l.run !== undefined) ? 1 : 2;
  }

  /** Make the chart's uPlot again (the theme, the y scale or the x axis changed). */
  private rebuild(): void {
    // uPlot keeps no cursor across a rebuild: a mouse still over the chart keeps its tip
    const left = this.u?.cursor.left ?? -1;
    const top = this.u?.cursor.top ?? -1;
    this.u?.destroy();
    this.u = null;
    this.render();
    const made = this.u as uPlot | null; // render() makes it (none for a chart held back)
    if (made && left >= 0 && top >= 0) made.setCursor({ left, top });
  }

  private create(): uPlot {
    const u = new uPlot(this.options(1, true), this.table, this.el);
    u.over.addEventListener("wheel", (e) => this.wheel(e), { passive: false });
    u.root.addEventListener("click", (e) => this.legendClick(e));
    u.root.addEventListener("mousemove", (e) => this.legendHover(e));
    if (this.onPick) {
      // a drag (a zoom) ends in a click too: only a click where the button went down picks
      // and a double click (which resets the zoom) picks nothing: a click picks once the
      // time for a second one has passed (the History it opens is brought into view)
      let down = { x: NaN, y: NaN };
      let pick: number | undefined;
      u.over.addEventListener("mousedown", (e) => (down = { x: e.clientX, y: e.clientY }));
      u.over.addEventListener("click", (e) => {
        window.clearTimeout(pick);
        const still = Math.abs(e.clientX - down.x) <= 3 && Math.abs(e.clientY - down.y) <= 3;
        const step = this.tipStep;
        if (!still || step === null || e.detail > 1) return;
        pick = window.setTimeout(() => this.onPick?.(step), PICK_WAIT_MS);
      });
    }
    // the tooltip stays on top of the chart
    this.el.appendChild(this.tip);
    const theme = chartTheme();
    this.tip.style.background = theme.bg;
    this.tip.style.borderColor = theme.grid;
    this.tip.style.color = theme.text;
    return u;
  }

  private render(): void {
    // a removed chart makes no uPlot again (a live point or a zoom answer may still come);
    // a chart held back is prepared and drawn once revealed
    if (this.disposed || this.deferred) return;
    this.colors = lineColors(this.lines);
    this.dashes = lineDashes(this.lines);
    const smoothed = smoothedLines(this.data.map((d) => d.step));
    this.smooth = smoothed.map((s) => s && this.smoothing > 0);
    const several = this.lines.some((l) => l.run !== undefined);
    this.layers = [];
    this.drawn = this.data.map((d, i) => {
      const color = this.colors[i];
      const xs = this.xs(d);
      const values = this.logY ? d.value.map((v) => (v !== null && v > 0 ? v : null)) : d.value;
      const main = this.smooth[i] ? ema(values, this.smoothing) : values;
      // a line hidden from the legend hides what lies under it too; a chart of several runs
      // draws no bands and no raw lines (theirs would cover each other, and they cost the
      // most to paint)
      const band = d.min && d.max && !this.logY && !several;
      const raw = this.smooth[i] && !several;
      if ((band || raw) && !this.hidden.has(i)) {
        this.layers.push({ color, xs, min: band ? d.min : null, max: band ? d.max : null, raw: raw ? values : null });
      }
      const line: DrawnLine = { xs: [], at: [], shown: [] };
      for (let j = 0; j < xs.length; j++) {
        const x = xs[j];
        if (x === null) continue;
        line.xs.push(x);
        line.at.push(j);
        const v = main[j];
        line.shown.push(v !== null && Number.isFinite(v) ? v : null);
      }
      if (!ascending(line.xs)) {
        const order = line.xs.map((_, k) => k).sort((a, b) => line.xs[a] - line.xs[b] || a - b);
        return { xs: order.map((k) => line.xs[k]), at: order.map((k) => line.at[k]), shown: order.map((k) => line.shown[k]) };
      }
      return line;
    });
    this.table = aligned(this.drawn);
    const xs = this.table[0] as number[];
    this.minSpan = xs.length > 1 ? 2 * medianGap(xs) : 0;
    if (!this.window && xs.length) this.extent = { min: Math.min(xs[0], this.firstX() ?? xs[0]), max: xs[xs.length - 1] };
    this.marks = this.findings.flatMap((f) => {
      const a = this.xAtStep(f.first_step ?? 0);
      const last = Math.max(f.last_step ?? f.first_step ?? 0, f.first_step ?? 0);
      let b = this.xAtStep(last);
      if (a === null || b === null) return [];
      if (this.xMode === "step") b = Math.max(b, a + 0.5);
      return [{ a, b, color: SEVERITY_COLOR[f.severity] ?? SEVERITY_COLOR.info, title: f.title }];
    });
    if (!this.u) {
      this.u = this.create();
      // made again (log scale, theme): it keeps the window it was zoomed to
      if (this.window) this.u.setScale("x", { ...this.window });
    } else {
      this.u.series.forEach((s, i) => {
        if (i > 0) s.width = this.lineWidth;
      });
      const u = this.u;
      u.batch(() => {
        u.setData(this.table, !this.window);
        if (this.window) u.setScale("x", { ...this.window });
      });
    }
    const showLegend = this.showLegend;
    this.el.dataset.points = String(this.data[0]?.step.length ?? 0);
    this.el.dataset.counts = this.data.map((d) => `${d.line.key}=${d.step.length}`).join(";");
    this.el.dataset.full = this.data.every((d) => d.full) ? "true" : "false";
    this.el.dataset.markers = String(this.findings.length);
    this.el.dataset.legend = showLegend ? this.lines.map((l) => l.label).join("|") : "";
    this.el.dataset.colors = this.lines.map((l, i) => `${l.label}=${this.colors[i]}`).join("|");
    this.el.dataset.dashes = this.dashes.map((d) => d.join(",")).join("|");
    this.el.dataset.smoothed = this.data.filter((_, i) => this.smooth[i]).map((d) => d.line.label).join("|");
    this.el.dataset.hidden = this.lines.filter((_, i) => this.hidden.has(i)).map((l) => l.label).join("|");
  }
}
