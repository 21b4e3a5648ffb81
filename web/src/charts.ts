// The charts section of a run: resolves which charts to draw from the run's metric keys
// (the specs' charts, the keys the metric picker added, the metrics a health finding names),
// loads them with one downsampled request, applies live points, and keeps each chart's
// settings (log scale, smoothing, x axis) and the run's chart set in localStorage. A read
// the server does not answer (it is down) is said above the charts and made again every
// 2 s until it answers (retry.ts): a chart whose series were not read is read by it.

import { chartSelectors, getJSON, type KeySelectors } from "./api";
import "./charts.css";
import { ADDED_GROUP, CHARTS, FLAGGED_GROUP, GROUPS, canonicalName, findKey, findName, resolveLines, type ResolvedLine } from "./chartspecs";
import type { TokenAxis } from "./chartmath";
import { ChartView, X_LABELS, fitCharts, type XMode } from "./chartview";
import { clear, FailureLine, h, MARKS, painted } from "./dom";
import { downloadCsv, downloadPng, seriesTable } from "./export";
import { MetricPicker, type PickerKey } from "./picker";
import { Reads } from "./retry";
import type { Finding, MetricKey, PointsEvent, SeriesResponse } from "./types";

import { MAX_POINTS, pointBudget } from "./early";

export { MAX_POINTS, pointBudget };

/** A small button in a chart card's head. */
export function chartButton(cls: string, label: string, title: string): HTMLButtonElement {
  return h("button", { type: "button", class: `chart-button ${cls}`, title, "aria-label": title }, label);
}
// The most points the server sends per series (routes_metrics MAX_POINTS): what a CSV
// export and the tokens axis ask for.
const EXPORT_POINTS = 20_000;
const SMOOTHING_KEY = "runwatch.smoothing";

/** The page's smoothing as last set on any page (run or compare), 0.6 at first. */
export function storedSmoothing(): number {
  const stored = Number(localStorage.getItem(SMOOTHING_KEY) ?? "0.6");
  return Number.isFinite(stored) ? Math.min(Math.max(stored, 0), 0.99) : 0.6;
}

/** The page's smoothing slider with its value beside it; `onChange` gets each new weight,
 * which is remembered for the next page. */
export function smoothingControl(weight: number, onChange: (weight: number) => void): HTMLElement {
  const slider = h("input", { type: "range", min: "0", max: "0.99", step: "0.01", value: String(weight), "aria-label": "Smoothing" });
  const shown = h("span", { class: "muted smoothing-value" }, weight.toFixed(2));
  slider.addEventListener("input", () => {
    shown.textContent = Number(slider.value).toFixed(2);
    localStorage.setItem(SMOOTHING_KEY, slider.value);
    onChange(Number(slider.value));
  });
  return h("label", { class: "smoothing" }, "Smoothing ", slider, " ", shown);
}
const CHARTS_KEY = "runwatch.charts.";

interface ChartSettings {
  log?: boolean;
  smoothing?: number;
  x?: XMode;
}

/** What a run page remembers of its charts: keys added with the picker, charts removed
 * (spec chart ids, `key:<key>`), and each chart's own settings. */
interface StoredCharts {
  added: string[];
  removed: string[];
  settings: Record<string, ChartSettings>;
}

function loadStored(runId: string): StoredCharts {
  const empty: StoredCharts = { added: [], removed: [], settings: {} };
  try {
    const v = JSON.parse(localStorage.getItem(CHARTS_KEY + runId) ?? "null") as Partial<StoredCharts> | null;
    if (!v || typeof v !== "object") return empty;
    const strings = (a: unknown): string[] => (Array.isArray(a) ? a.filter((x): x is string => typeof x === "string") : []);
    return { added: strings(v.added), removed: strings(v.removed), settings: v.settings && typeof v.settings === "object" ? v.settings : {} };
  } catch {
    return empty;
  }
}

/** The /series request for `keys` of `runs` (every run's series share the bucket edges);
 * without `bands`, no bucket min and max (a chart of several runs draws none). */
export function seriesPath(runs: string[], keys: string[], range: { lo: number; hi: number } | null, points: number, time = false, bands = true): string {
  const q = new URLSearchParams();
  for (const r of runs) q.append("run", r);
  for (const k of keys) q.append("key", k);
  q.set("points", String(points));
  if (range) {
    q.set("lo", String(range.lo));
    q.set("hi", String(range.hi));
  }
  if (time) q.set("x", "time");
  if (!bands) q.set("bands", "false");
  return `/series?${q.toString()}`;
}

/**
 * Whether a tokens series counts tokens so far (it rises at nearly every step) rather than
 * tokens per step (it goes up and down, or stays the same).
 */
function isRunningTotal(values: (number | null)[]): boolean {
  const v = values.filter((x): x is number => x !== null);
  if (v.length < 3) return false;
  let rises = 0;
  for (let i = 1; i < v.length; i++) {
    if (v[i] < v[i - 1]) return false;
    if (v[i] > v[i - 1]) rises++;
  }
  return rises >= 0.9 * (v.length - 1);
}

interface ChartDef {
  id: string;
  title: string;
  group: string;
  lines: ResolvedLine[];
  logY: boolean;
  legend: boolean;
}

interface Chart {
  def: ChartDef;
  view: ChartView;
  x: XMode; // the x axis its settings ask for (the view shows it once it is read)
  card: HTMLElement;
  reset: HTMLButtonElement;
  smoothing: HTMLInputElement;
  smoothingShown: HTMLElement;
  request: number; // the latest series request, so an older answer is dropped
}

export class ChartsPanel {
  readonly el: HTMLElement;
  private charts = new Map<string, Chart>();
  private knownKeys = new Set<string>();
  private pickerKeys = new Map<string, PickerKey>();
  private stored: StoredCharts;
  private flagged = new Set<string>(); // keys a finding names that no chart showed
  private smoothing: number;
  private findings: Finding[] = [];
  // until the keys come: the pane is on the page while its first request travels
  private grid = h("div", { class: "chart-groups" }, h("p", { class: "muted loading" }, "Loading…"));
  private picker: MetricPicker;
  private resizeObserver: ResizeObserver;
  private disposed = false;
  private tokens: { key: string; axis: TokenAxis; runningTotal: boolean } | null = null;
  private tokensLoading: Promise<void> | null = null;
  // the whole series the run page read with the run's keys (GET /api/overlay), for the
  // first charts on a step axis
  private preloaded: SeriesResponse["series"] | null = null;
  // a chart's read that failed (a zoom, a new chart, an export while the server is down)
  private failure = new FailureLine("charts-error", "A chart could not be read.");
  // the charts' reads ("build", "window:<chart id>"), each made again while it fails
  private reads = new Reads();
  // the charts made whose series are not read yet: each build reads them (a failed one, again)
  private unread = new Set<Chart>();

  /** `onPick`: a click on a chart's point gives its step (the run page's History opens it). */
  constructor(
    private readonly runId: string,
    private readonly onPick: ((step: number) => void) | null = null,
  ) {
    this.stored = loadStored(runId);
    this.smoothing = storedSmoothing();
    const smoothing = smoothingControl(this.smoothing, (weight) => {
      this.smoothing = weight;
      for (const c of this.charts.values()) {
        if (this.stored.settings[c.def.id]?.smoothing === undefined) this.applySmoothing(c, this.smoothing);
      }
    });
    this.picker = new MetricPicker(
      (key) => this.pick(key),
      () => this.restoreDefaults(),
    );
    const add = h("button", { type: "button", id: "chart-picker-open", class: "chart-add" }, "+ Add chart");
    add.addEventListener("click", () => (this.picker.isOpen ? this.picker.close() : this.picker.open()));
    this.el = h(
      "section",
      { class: "card charts", id: "charts" },
      h(
        "div",
        { class: "card-head" },
        h("h3", {}, "Metrics"),
        h("div", { class: "charts-tools" }, add, smoothing),
      ),
      this.failure.el,
      this.picker.el,
      this.grid,
    );
    this.resizeObserver = new ResizeObserver(() => {
      fitCharts([...this.charts.values()].map((c) => c.view));
    });
    this.resizeObserver.observe(this.grid);
  }

  /** What the charts this page would show first are found by in any run's keys (its spec
   * charts not removed, the keys added): for one request of keys and series together. */
  selectors(): KeySelectors {
    const removed = new Set(this.stored.removed);
    return chartSelectors(CHARTS.filter((spec) => !removed.has(spec.id)), this.stored.added);
  }

  /** Load the charts of the run's `keys`; `series` (whole series on a step axis, as the
   * keys came with them) spares the charts' first request where they hold every key. */
  async load(keys: MetricKey[], series: SeriesResponse["series"] | null = null): Promise<void> {
    this.preloaded = series;
    const logged = keys.filter((k) => k.count > 0);
    this.knownKeys = new Set(logged.map((k) => k.key));
    for (const k of logged) this.pickerKeys.set(k.key, { key: k.key, count: k.count, canonical: k.canonical });
    this.flag(); // findings that arrived before the keys
    await this.build();
    // only the first charts take them: charts made later would miss what was logged since
    this.preloaded = null;
  }

  /** The charts the run page shows now, in order: the specs', then added, then flagged. */
  private wanted(): ChartDef[] {
    const removed = new Set(this.stored.removed);
    const out = new Map<string, ChartDef>();
    for (const spec of CHARTS) {
      if (removed.has(spec.id)) continue;
      const lines = resolveLines(spec, this.knownKeys);
      // one line that is not the chart's first (val accuracy alone) is named by a legend
      const legend = lines.length === 1 && spec.lines.length > 1 && lines[0].label !== spec.lines[0].label;
      if (lines.length) out.set(spec.id, { id: spec.id, title: spec.title, group: spec.group, lines, logY: !!spec.logY, legend });
    }
    const single = (key: string, group: string): void => {
      const id = `key:${key}`;
      if (removed.has(id) || out.has(id) || !this.knownKeys.has(key)) return;
      out.set(id, { id, title: key, group, lines: [{ label: key, key }], logY: false, legend: false });
    };
    for (const key of this.stored.added) single(key, ADDED_GROUP);
    for (const key of this.flagged) single(key, FLAGGED_GROUP);
    return [...out.values()];
  }

  /** Create the charts whose lines changed with the known keys, and load their data. */
  private async build(): Promise<void> {
    const created: Chart[] = [];
    const wanted = this.wanted();
    const ids = new Set(wanted.map((d) => d.id));
    for (const [id, c] of this.charts) if (!ids.has(id)) this.drop(c);
    for (const def of wanted) {
      const old = this.charts.get(def.id);
      if (old && old.view.keys.join("\n") === def.lines.map((l) => l.key).join("\n")) continue;
      const c = this.chart(def);
      if (old) {
        this.unread.delete(old);
        old.view.dispose();
        old.card.replaceWith(c.card);
      } else {
        this.groupEl(def.group).appendChild(c.card);
      }
      this.charts.set(def.id, c);
      this.unread.add(c);
      created.push(c);
    }
    this.updatePicker();
    // the charts made now, and those made before whose read failed
    const unread = [...this.charts.values()].filter((c) => this.unread.has(c));
    if (!unread.length) {
      if (!this.charts.size) {
        const note = this.knownKeys.size ? "No charts: add one with + Add chart, or go back to the default charts there." : "No metrics logged yet.";
        this.grid.replaceChildren(h("p", { class: "muted empty" }, note));
      }
      return;
    }
    this.grid.querySelector(".empty, .loading")?.remove();
    // the new charts were made in boxes not yet on the page: size them all at once
    fitCharts(created.map((c) => c.view));
    if (unread.some((c) => c.x === "tokens")) await this.loadTokens();
    for (const c of unread) {
      if (c.view.x === "tokens") c.view.setX("tokens", this.tokens?.axis ?? null);
    }
    // one request for the charts on a step axis, one for those that need each point's time
    const loads = [false, true].map(async (time) => {
      const batch = unread.filter((c) => c.view.needsTime === time);
      if (!batch.length) return;
      const keys = batch.flatMap((c) => c.view.keys);
      const series = (!time && this.takePreloaded(keys)) || (await getJSON<SeriesResponse>(seriesPath([this.runId], keys, null, this.budget(batch[0].view), time))).series;
      if (this.disposed) return;
      for (const c of batch) {
        // removed, or read by another build or its window's read, meanwhile
        if (!this.unread.delete(c)) continue;
        c.view.setFindings(this.findings, false);
        c.view.setSeries(series, true);
      }
    });
    await Promise.all(loads);
    if (this.disposed) return;
    this.grid.dataset.ready = "true";
    // uPlot draws a chart's canvas in a microtask it queued when made: this one runs after
    queueMicrotask(() => performance.mark(MARKS.built));
    // the browser paints the charts' canvases on the next frame: mark them drawn after it
    void painted().then(() => {
      performance.mark(MARKS.drawn);
      this.grid.dataset.drawn = "true";
    });
  }

  /** The preloaded series (once) if they hold every one of `keys`. */
  private takePreloaded(keys: string[]): SeriesResponse["series"] | null {
    const series = this.preloaded;
    this.preloaded = null;
    if (!series) return null;
    const held = new Set(series.map((s) => s.key));
    return keys.every((k) => held.has(k)) ? series : null;
  }

  /** Build the charts (see `build`); a build the server does not answer is made again. */
  private loadCharts(): Promise<void> {
    return this.reads.read("build", { work: () => this.build(), line: this.failure });
  }

  /** Read the window chart `c` shows now on the x axis it asks for; a read the server does
   * not answer is made again (a later zoom or x axis takes its place). */
  private readWindow(c: Chart): void {
    void this.reads.read(`window:${c.def.id}`, { work: () => this.loadWindow(c), line: this.failure });
  }

  private settings(id: string): ChartSettings {
    return this.stored.settings[id] ?? {};
  }

  private save(): void {
    localStorage.setItem(CHARTS_KEY + this.runId, JSON.stringify(this.stored));
  }

  private setting(id: string, change: ChartSettings): void {
    this.stored.settings[id] = { ...this.settings(id), ...change };
    this.save();
  }

  /** A chart's card: title, its controls, the chart, and the settings it remembers. */
  private chart(def: ChartDef): Chart {
    const s = this.settings(def.id);
    const tokensKey = findKey(this.knownKeys, "tokens");
    const x: XMode = s.x === "tokens" && !tokensKey ? "step" : (s.x ?? "step");
    const smoothing = s.smoothing ?? this.smoothing;
    const box = h("div", { class: "chart", "data-chart": def.id });
    const button = chartButton;
    const reset = button("chart-reset", "Reset zoom", "Zoom back out to the whole run");
    reset.hidden = true;
    const gear = button("chart-settings-toggle", "⚙", "Chart settings");
    const csv = button("chart-csv", "CSV", "Download the chart's series as CSV");
    const png = button("chart-png", "PNG", "Download the chart as a PNG image");
    const remove = button("chart-remove", "×", "Remove this chart");
    const log = h("input", { type: "checkbox", class: "chart-log" });
    log.checked = s.log ?? def.logY;
    const slider = h("input", { type: "range", class: "chart-smoothing", min: "0", max: "0.99", step: "0.01", value: String(smoothing), "aria-label": "Smoothing of this chart" });
    const smoothingShown = h("span", { class: "muted" }, smoothing.toFixed(2));
    const modes: XMode[] = ["step", "time", "relative", ...(tokensKey ? (["tokens"] as const) : [])];
    const xSelect = h("select", { class: "chart-x", "aria-label": "X axis" }, ...modes.map((m) => h("option", { value: m }, X_LABELS[m])));
    xSelect.value = x;
    const settings = h(
      "div",
      { class: "chart-settings", hidden: "" },
      h("label", {}, log, " Log scale"),
      h("label", {}, "Smoothing ", slider, " ", smoothingShown),
      h("label", {}, "X axis ", xSelect),
    );
    const card = h(
      "div",
      { class: "chart-card", "data-chart-card": def.id },
      h("div", { class: "chart-head" }, h("h4", { title: def.lines.map((l) => l.key).join(", ") }, def.title), h("div", { class: "chart-buttons" }, reset, gear, csv, png, remove)),
      settings,
      box,
    );
    // a tokens axis is set (with build's loadTokens) before the series arrive
    const view = new ChartView(box, def.lines, log.checked, smoothing, (range) => {
      c.reset.hidden = range === null;
      this.readWindow(c);
    }, { legend: def.legend, x, onPick: this.onPick ?? undefined });
    const c: Chart = { def, view, x, card, reset, smoothing: slider, smoothingShown, request: 0 };
    gear.addEventListener("click", () => (settings.hidden = !settings.hidden));
    reset.addEventListener("click", () => c.view.resetZoom());
    remove.addEventListener("click", () => this.remove(c));
    csv.addEventListener("click", () => void this.reads.read(null, { work: () => this.exportCsv(c), line: this.failure, what: "The chart's CSV could not be read." }));
    png.addEventListener("click", () => downloadPng(`${this.fileStem(c)}.png`, c.view));
    log.addEventListener("change", () => {
      this.setting(def.id, { log: log.checked });
      c.view.setLogY(log.checked);
    });
    slider.addEventListener("input", () => {
      this.setting(def.id, { smoothing: Number(slider.value) });
      this.applySmoothing(c, Number(slider.value));
    });
    xSelect.addEventListener("change", () => {
      c.x = xSelect.value as XMode;
      this.setting(def.id, { x: c.x });
      this.readWindow(c);
    });
    return c;
  }

  private applySmoothing(c: Chart, weight: number): void {
    c.smoothing.value = String(weight);
    c.smoothingShown.textContent = weight.toFixed(2);
    c.view.setSmoothing(weight);
  }

  /** The chart's series over the window it shows (zoomed, or the whole run), on the x axis
   * it asks for: a new x axis (its tokens read first) shows the whole run. */
  private async loadWindow(c: Chart): Promise<void> {
    if (c.x === "tokens") await this.loadTokens();
    // removed or made again meanwhile: nothing to read for it
    if (this.disposed || this.charts.get(c.def.id) !== c) return;
    if (c.view.x !== c.x) {
      c.view.setX(c.x, this.tokens?.axis ?? null);
      c.reset.hidden = true;
    }
    // a later read of the chart (a zoom, an x axis) drops this one's answer
    const request = ++c.request;
    const resp = await getJSON<SeriesResponse>(seriesPath([this.runId], c.view.keys, c.view.zoomed, this.budget(c.view), c.view.needsTime));
    if (this.disposed || request !== c.request) return;
    // a chart whose build did not read it is read now: the next build leaves it
    c.view.setSeries(resp.series, this.unread.delete(c));
  }

  private fileStem(c: Chart): string {
    return `${this.runId}-${c.def.id.replace(/[^A-Za-z0-9._-]+/g, "_")}`;
  }

  /** The chart's lines over its zoom range, at up to the server's most points per series. */
  private async exportCsv(c: Chart): Promise<void> {
    const resp = await getJSON<SeriesResponse>(seriesPath([this.runId], c.view.keys, c.view.zoomed, EXPORT_POINTS, true));
    const { header, rows } = seriesTable(c.def.lines, resp.series);
    downloadCsv(`${this.fileStem(c)}.csv`, header, rows);
  }

  /** Load the tokens axis (once): the tokens trained up to each step. */
  private loadTokens(): Promise<void> {
    const key = findKey(this.knownKeys, "tokens");
    if (!key) return Promise.resolve();
    // a read that failed is made again at the next call
    this.tokensLoading ??= (async () => {
      const resp = await getJSON<SeriesResponse>(seriesPath([this.runId], [key], null, EXPORT_POINTS, false));
      const s = resp.series[0];
      if (!s) return;
      const runningTotal = isRunningTotal(s.value);
      const total: number[] = [];
      let sum = 0;
      s.step.forEach((step, j) => {
        const v = s.value[j] ?? 0;
        // a downsampled per-step series: each bucket's last value stands for its steps
        const steps = s.full || j === 0 ? 1 : step - s.step[j - 1];
        sum = runningTotal ? v : sum + v * steps;
        total.push(sum);
      });
      this.tokens = { key, axis: { steps: s.step.slice(), total }, runningTotal };
    })().catch((e: unknown) => {
      this.tokensLoading = null;
      throw e;
    });
    return this.tokensLoading;
  }

  /** Points per series: about one per pixel of plot width. */
  private budget(view: ChartView): number {
    const width = view.el.clientWidth || this.grid.clientWidth / 2;
    return pointBudget(width);
  }

  private groupEl(group: string): HTMLElement {
    let el = this.grid.querySelector<HTMLElement>(`[data-group="${group}"]`);
    if (!el) {
      el = h("div", { class: "chart-group", "data-group": group }, h("h4", { class: "group-title" }, group), h("div", { class: "chart-row" }));
      // keep groups in their declared order
      const after = [...this.grid.querySelectorAll<HTMLElement>("[data-group]")].find(
        (g) => GROUPS.indexOf(g.dataset.group ?? "") > GROUPS.indexOf(group),
      );
      this.grid.insertBefore(el, after ?? null);
    }
    return el.querySelector(".chart-row") as HTMLElement;
  }

  private pick(key: string): void {
    if (!this.stored.added.includes(key)) this.stored.added.push(key);
    this.stored.removed = this.stored.removed.filter((id) => id !== `key:${key}`);
    this.save();
    void this.loadCharts().then(() => this.charts.get(`key:${key}`)?.card.scrollIntoView({ block: "nearest" }));
  }

  private remove(c: Chart): void {
    const key = c.def.id.startsWith("key:") ? c.def.id.slice(4) : null;
    if (key) this.stored.added = this.stored.added.filter((k) => k !== key);
    if (!this.stored.removed.includes(c.def.id)) this.stored.removed.push(c.def.id);
    this.save();
    this.drop(c);
    void this.loadCharts(); // the last chart gone says so
  }

  private drop(c: Chart): void {
    this.unread.delete(c);
    c.view.dispose();
    const group = c.card.closest<HTMLElement>(".chart-group");
    c.card.remove();
    if (group && !group.querySelector(".chart-card")) group.remove();
    this.charts.delete(c.def.id);
  }

  private restoreDefaults(): void {
    localStorage.removeItem(CHARTS_KEY + this.runId);
    this.stored = { added: [], removed: [], settings: {} };
    for (const c of [...this.charts.values()]) this.drop(c);
    void this.loadCharts();
  }

  private updatePicker(): void {
    const shown = new Set([...this.charts.values()].flatMap((c) => c.view.keys));
    this.picker.setKeys([...this.pickerKeys.values()], shown);
  }

  /** Apply one live record: append to each chart showing its keys; new keys may add charts. */
  applyPoints(ev: PointsEvent): void {
    let fresh = false;
    const now = Date.now() / 1000;
    for (const [key, value] of Object.entries(ev.values)) {
      if (!this.knownKeys.has(key)) {
        this.knownKeys.add(key);
        this.pickerKeys.set(key, { key, count: null, canonical: canonicalName(key)[0] });
        fresh = true;
      }
      if (this.tokens && key === this.tokens.key && value !== null) this.growTokens(ev.step, value);
      for (const c of this.charts.values()) {
        if (c.view.keys.includes(key)) c.view.append(key, ev.step, value, undefined, now);
      }
    }
    if (fresh) void this.loadCharts();
  }

  private growTokens(step: number, value: number): void {
    if (!this.tokens) return;
    const { axis, runningTotal } = this.tokens;
    const n = axis.steps.length;
    if (n && step <= axis.steps[n - 1]) return;
    axis.steps.push(step);
    axis.total.push(runningTotal ? value : (n ? axis.total[n - 1] : 0) + value);
    for (const c of this.charts.values()) c.view.tokensChanged();
  }

  /** Findings mark the charts of their metrics; a metric no chart shows gets a chart. */
  setFindings(findings: Finding[]): void {
    this.findings = findings;
    for (const c of this.charts.values()) c.view.setFindings(findings);
    if (this.flag()) void this.loadCharts();
  }

  /** Add to `flagged` the first logged key of each finding no chart shows; true if any. */
  private flag(): boolean {
    const shown = new Set(this.wanted().flatMap((d) => d.lines.flatMap((l) => [l.key, canonicalName(l.key)[0]])));
    let grew = false;
    for (const f of this.findings) {
      if (f.first_step === null || !f.metrics.length || f.metrics.some((m) => shown.has(m))) continue;
      const key = f.metrics.map((m) => findName(this.knownKeys, m)).find((k) => k !== undefined);
      if (key && !this.flagged.has(key)) {
        this.flagged.add(key);
        shown.add(key);
        grew = true;
      }
    }
    return grew;
  }

  dispose(): void {
    this.disposed = true;
    this.reads.dispose();
    this.resizeObserver.disconnect();
    for (const c of this.charts.values()) c.view.dispose();
    this.charts.clear();
    clear(this.grid);
  }
}
