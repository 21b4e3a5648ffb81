// The compare view, /compare?run=A&run=B…[&key=K…][&baseline=B&subject=A][&across_plans=1][&only_diff=1]:
// the runs overlaid on the same charts, fetched in one series request so that every run
// shares the server's bucket edges (in groups of whole charts past the server's limit);
// the `runs compare` report of one run against a baseline; and a table of their settings
// with the differences marked. Runs that are still going are read again every 2 s
// (READ_AGAIN_MS): their new points are appended to the charts. A read that fails (the
// server down) is said in its card and made again at each poll until the server answers
// (retry.ts).

import "./compare.css";
import { ApiError, getJSON, getOverlay, overlayPath, plainError, runPath, type Overlay } from "./api";
import { MAX_POINTS, chartButton, seriesPath, smoothingControl, storedSmoothing } from "./charts";
import { MAX_SERIES, compareSelectors, pointBudget, readCompareState, takeEarlyOverlay, type CompareState } from "./early";

export { readCompareState, type CompareState };
import { CHARTS, canonicalName, findKey, resolveLines, type ChartSpec, type ResolvedLine } from "./chartspecs";
import { ChartView, fitCharts } from "./chartview";
import { CompareReportPanel, notComparable } from "./comparereport";
import { ConfigTable } from "./configtable";
import { FailureLine, h, MARKS, painted, reconcile } from "./dom";
import { downloadCsv, downloadPng, seriesTable } from "./export";
import { runStatusClass, statusText } from "./format";
import { TERMINAL_PHASES } from "./format.gen";
import { MetricPicker } from "./picker";
import { Reads } from "./retry";
import type { MetricKey, MetricKeys, RunDetail, RunList, RunSummary, SeriesData, SeriesResponse } from "./types";

export function writeCompareState(s: CompareState, p: URLSearchParams): void {
  for (const r of s.runs) p.append("run", r);
  for (const k of s.keys) p.append("key", k);
  if (s.baseline) p.set("baseline", s.baseline);
  if (s.subject) p.set("subject", s.subject);
  if (s.acrossPlans) p.set("across_plans", "1");
  if (s.onlyDiff) p.set("only_diff", "1");
}

// points per series of a chart's CSV: the server's most
const EXPORT_POINTS = 20_000;
// polls of a run after it ended: its last points may be indexed after its end
const POLLS_AFTER_END = 2;

/** One compared run: its list fields, detail and keys, and the last step each key is shown up to. */
interface Compared {
  ident: string;
  run: RunSummary;
  /** Its detail, asked for on first use (see fetchRun). */
  detail: () => Promise<RunDetail>;
  keys: Set<string>;
  counts: Map<string, number>;
  shownTo: Map<string, number>;
  pollsLeft: number;
}

interface Chart {
  id: string;
  title: string;
  lines: ResolvedLine[];
  logY: boolean;
  extra: boolean;
  /** Some compared run logged a key of the chart. */
  logged: boolean;
}

const lineKey = (run: string, key: string) => `${run}\n${key}`;

export class CompareView {
  readonly el = h("main", { class: "detail compare", id: "compare" });
  private runs: Compared[] = [];
  private views = new Map<string, ChartView>();
  private grid = h("div", { class: "chart-row", id: "compare-charts" });
  private notice = h("div", { class: "notice", role: "status" });
  private chips = h("ul", { class: "compare-runs", id: "compare-runs" });
  private picker: MetricPicker;
  private smoothing: number;
  private resizeObserver: ResizeObserver;
  private config: ConfigTable;
  private report: CompareReportPanel;
  private disposed = false;
  // a read of the charts that failed: a zoom, a chart added, new points, an export
  private failure = new FailureLine("compare-charts-error", "A chart could not be read.");
  // the view's reads ("build", "zoom:<chart id>", "report", "settings"), each made again
  // every 2 s while it fails, in one turn with the poll of the runs still going
  private reads = new Reads({ work: () => this.poll(), line: this.failure, wanted: () => this.runs.some((r) => r.pollsLeft > 0) });
  // the whole series the runs were read with (GET /api/overlay), for the first charts
  private preloaded: SeriesData[] | null = null;
  // the drawing of charts held back out of the window (drawLater)
  private later: { observer: IntersectionObserver; cancel: () => void } | null = null;
  private stopTask: (() => void) | null = null;
  private builds = 0;
  // the last build's charts all drawn and painted (or that build made again)
  private allDrawn: Promise<void> = Promise.resolve();

  constructor(
    private state: CompareState,
    private readonly onState: (s: CompareState) => void,
    private readonly onOpenRun: (runId: string) => void,
    private readonly onRuns: (runIds: string[]) => void,
  ) {
    this.smoothing = storedSmoothing();
    this.config = new ConfigTable(state.onlyDiff, (onlyDiff) => this.setState({ onlyDiff }));
    this.report = new CompareReportPanel(
      (baseline, subject, acrossPlans) => {
        this.setState({ baseline, subject, acrossPlans });
        void this.loadReport();
      },
      (runId) => this.whyNot(runId),
    );
    this.picker = new MetricPicker(
      (key) => this.addKey(key),
      () => this.setKeys([]),
    );
    this.resizeObserver = new ResizeObserver(() => {
      fitCharts(this.views.values());
    });
    this.resizeObserver.observe(this.grid);
  }

  private setState(change: Partial<CompareState>): void {
    this.state = { ...this.state, ...change };
    this.onState(this.state);
  }

  async load(): Promise<void> {
    if (this.state.runs.length === 0) {
      this.el.replaceChildren(h("p", { class: "muted empty" }, "Tick two or more runs in the list (or a group), then press Compare."));
      return;
    }
    const missing: string[] = [];
    const overlay = await this.fetchOverlay();
    performance.mark(MARKS.answered);
    if (this.disposed) return;
    if (overlay) {
      this.runs = overlay.runs.map((o) => compared(o.ident, o.run, o.keys, lazyDetail(o.ident)));
      for (const m of overlay.missing) missing.push(`${m.ident} (${plainError(m.error, m.status).message})`);
      this.preloaded = overlay.series;
    } else {
      const loaded = await Promise.allSettled(this.state.runs.map((ident) => this.fetchRun(ident)));
      if (this.disposed) return;
      loaded.forEach((r, i) => {
        if (r.status === "fulfilled") this.runs.push(r.value);
        else missing.push(`${this.state.runs[i]} (${r.reason instanceof Error ? r.reason.message : String(r.reason)})`);
      });
    }
    if (missing.length) {
      this.notice.classList.add("error");
      this.notice.textContent = `Not compared: ${missing.join("; ")}`;
    }
    // one run has no baseline to be compared with: no report
    const report = this.runs.length >= 2;
    this.el.replaceChildren(this.head(), this.notice, this.chartsCard(), ...(report ? [this.report.el] : []), this.config.el);
    this.showChips();
    const ids = this.runs.map((r) => r.run.run_id);
    this.onRuns(ids);
    // the report starts from runs it can compare, where the URL names none
    const able = ids.filter((id) => this.whyNot(id) === null);
    const baseline = this.pick(this.state.baseline) ?? able[0] ?? ids[0];
    const subject = this.pick(this.state.subject) ?? able.find((id) => id !== baseline) ?? ids.find((id) => id !== baseline);
    // The report and the settings table are asked for once the charts are painted: on a
    // cold server each reads the runs' whole series, and asked for at once they take the
    // server from the charts' request.
    await this.buildCharts();
    // the report's form and the settings table wait for every chart drawn (made first,
    // they delayed the charts in the window; made between, those held back)
    await this.allDrawn;
    if (this.disposed) return;
    if (report) {
      this.report.show(this.runs.map((r) => r.run), baseline ?? null, subject ?? null, this.state.acrossPlans);
      void this.loadReport();
    }
    void this.loadSettings();
    this.el.dataset.loaded = "true";
    this.reads.wake();
  }

  /** Why the report cannot compare a run (a reinforcement run, no training loss yet). */
  private whyNot(runId: string): string | null {
    const r = this.runs.find((x) => x.run.run_id === runId);
    return r ? notComparable(r.run, r.keys) : null;
  }

  private loadReport(): Promise<void> {
    return this.reads.read("report", { work: () => this.report.load(), line: this.report.failure });
  }

  private loadSettings(): Promise<void> {
    return this.reads.read("settings", {
      work: () => this.showSettings(),
      line: this.config.failure,
      what: () => `The settings of ${listed(this.config.unread)} could not be read.`,
    });
  }

  /** The settings table of the runs whose detail is read; it names the others (a read that
   * failed: its error is thrown, and the read is made again). */
  private async showSettings(): Promise<void> {
    const details = await Promise.allSettled(this.runs.map((r) => r.detail()));
    if (this.disposed) return;
    const unread = this.runs.filter((_, i) => details[i].status === "rejected").map((r) => r.run.name);
    this.config.show(details.flatMap((d) => (d.status === "fulfilled" ? [d.value] : [])), unread);
    const failed = details.find((d) => d.status === "rejected");
    if (failed) throw failed.reason;
  }

  /** The run id of a run named in the URL (by id or name), if it is compared. */
  private pick(ident: string | null): string | undefined {
    if (!ident) return undefined;
    return this.runs.find((r) => r.ident === ident || r.run.run_id === ident || r.run.name === ident)?.run.run_id;
  }

  /**
   * Every run's list fields and keys, in one request (GET /api/overlay), with the whole
   * series of the standard charts' and the added keys where they fit it (compareSelectors:
   * past the server's limit the charts' series are read in groups, fetchSeries); null where
   * it is refused (no run can be read): then each run is read on its own.
   */
  private async fetchOverlay(): Promise<Overlay | null> {
    try {
      // the charts are not on the page yet: about half the view's width each
      const points = pointBudget(this.el.clientWidth / 2);
      const select = compareSelectors(this.state);
      const opts = { points, bands: false };
      // asked by the first script already where it asked for the same (see early.ts)
      return await (takeEarlyOverlay(overlayPath(this.state.runs, select, opts)) ?? getOverlay(this.state.runs, select, opts));
    } catch (e) {
      if (e instanceof ApiError) return null;
      throw e;
    }
  }

  /**
   * A run's list fields and keys: what the charts need. Its detail, which reads the run's
   * whole series where no cache holds them (a second or more for a long run on a cold
   * server), is only asked for by the settings table, once the charts are loaded, or for a
   * run the list does not find by its exact id or name (a prefix).
   */
  private async fetchRun(ident: string): Promise<Compared> {
    const detail = lazyDetail(ident);
    const [run, keys] = await Promise.all([
      getJSON<RunList>("/runs", { q: ident, limit: 20 }).then(async ({ runs }) => runs.find((r) => r.run_id === ident || r.name === ident) ?? (await detail()).run),
      getJSON<MetricKeys>(`${runPath(ident)}/metrics/keys`),
    ]);
    return compared(ident, run, keys.keys, detail);
  }

  private head(): HTMLElement {
    const n = this.runs.length;
    return h(
      "header",
      { class: "detail-head" },
      h("div", { class: "title-row" }, h("h2", {}, `Compare ${n} ${n === 1 ? "run" : "runs"}`)),
      this.chips,
      n < 2 ? h("p", { class: "notice", id: "compare-needs-two" }, "Comparing needs two or more runs: tick another run in the list (or press a run's group), then press Compare.") : null,
    );
  }

  private showChips(): void {
    // patched, not rebuilt, on each update of a run (dom.ts, `morph`): a press on a chip
    // released after the run changed still opens it or leaves it out
    reconcile(
      this.chips,
      this.runs.map((r) => {
        const run = r.run;
        // cut short past the chip's room (compare.css): the tooltip holds it whole
        const open = h("a", { href: `/runs?run=${encodeURIComponent(run.run_id)}`, class: "chip-name", title: run.name }, run.name);
        open.addEventListener("click", (e) => {
          e.preventDefault();
          this.onOpenRun(run.run_id);
        });
        const remove = h("button", { class: "chip-remove", title: `Leave ${run.name} out`, "aria-label": `Leave ${run.name} out` }, "×");
        remove.addEventListener("click", () => this.setState({ runs: this.state.runs.filter((x) => x !== r.ident) }));
        return h("li", { class: "compare-chip", "data-run": run.run_id }, open, " ", h("span", { class: `status ${runStatusClass(run)}` }, h("span", { class: "dot" }), statusText(run)), remove);
      }),
    );
  }

  private chartsCard(): HTMLElement {
    const smoothing = smoothingControl(this.smoothing, (weight) => {
      this.smoothing = weight;
      for (const v of this.views.values()) v.setSmoothing(weight);
    });
    const add = h("button", { type: "button", id: "chart-picker-open", class: "chart-add" }, "+ Add chart");
    add.addEventListener("click", () => (this.picker.isOpen ? this.picker.close() : this.picker.open()));
    return h(
      "section",
      { class: "card charts" },
      h("div", { class: "card-head" }, h("h3", {}, "Metrics"), h("div", { class: "controls" }, add, smoothing)),
      this.failure.el,
      this.picker.el,
      this.grid,
    );
  }

  private addKey(key: string): void {
    if (!this.state.keys.includes(key)) this.setKeys([...this.state.keys, key]);
  }

  private setKeys(keys: string[]): void {
    this.setState({ keys });
    void this.buildCharts();
  }

  /** The picker lists every key any compared run logged, with its points over all of them. */
  private showKeyChoices(): void {
    const counts = new Map<string, number>();
    for (const r of this.runs) for (const [key, n] of r.counts) counts.set(key, (counts.get(key) ?? 0) + n);
    const shown = new Set([...this.state.keys, ...[...this.views.values()].flatMap((v) => v.keys)]);
    this.picker.setKeys([...counts].map(([key, count]) => ({ key, count, canonical: canonicalName(key)[0] })), shown);
  }

  /** The charts: each standard chart that every run has a line for, then the added keys. */
  private charts(): Chart[] {
    const label = (r: Compared, l: string) => `${r.run.name} · ${l}`;
    const out: Chart[] = [];
    for (const spec of CHARTS) {
      const perRun = this.runs.map((r) => resolveLines(spec, r.keys));
      if (!perRun.length || perRun.some((lines) => !lines.length)) continue;
      out.push({ ...chartOf(spec), lines: this.runs.flatMap((r, i) => perRun[i].map((l) => ({ label: label(r, l.label), key: l.key, run: r.run.run_id }))) });
    }
    // every run has a line on an added chart, logged or not, so that a run's colour (by its
    // place among the chart's runs) is the same on every chart
    for (const key of this.state.keys) {
      const lines = this.runs.map((r) => ({ label: label(r, key), key, run: r.run.run_id }));
      out.push({ id: `key:${key}`, title: key, lines, logY: false, extra: true, logged: this.runs.some((r) => r.keys.has(key)) });
    }
    return out;
  }

  /** Create the charts whose lines changed (all at first) and load them in one request. */
  private async buildCharts(): Promise<void> {
    await this.reads.read("build", { work: () => this.buildViews(), line: this.failure });
    this.showKeyChoices();
  }

  private async buildViews(): Promise<void> {
    const wanted = this.charts();
    const created: ChartView[] = [];
    for (const [id, view] of this.views) {
      if (wanted.some((c) => c.id === id)) continue;
      view.dispose();
      this.views.delete(id);
      this.grid.querySelector(`[data-chart-card="${CSS.escape(id)}"]`)?.remove();
    }
    for (const chart of wanted) {
      const old = this.views.get(chart.id);
      if (old && sameLines(old.lines, chart.lines)) continue;
      const card = this.chartCard(chart);
      // made before its card is on the page: measuring each new chart's box as it is made
      // would lay the page out once per chart (fitCharts sizes them all below)
      const box = card.querySelector(".chart") as HTMLElement;
      const view = new ChartView(box, chart.lines, chart.logY, this.smoothing, (range) => this.zoom(chart.id, view, range));
      const oldCard = this.grid.querySelector(`[data-chart-card="${CSS.escape(chart.id)}"]`);
      old?.dispose();
      if (oldCard) oldCard.replaceWith(card);
      else this.grid.appendChild(card);
      this.views.set(chart.id, view);
      created.push(view);
    }
    fitCharts(created);
    if (!wanted.length) {
      this.grid.replaceChildren(h("p", { class: "muted empty" }, "These runs have no chart in common: add a key above."));
    } else {
      this.grid.querySelector(".empty")?.remove();
    }
    let later: ChartView[] = [];
    if (created.length) {
      delete this.grid.dataset.drawn;
      delete this.grid.dataset.viewDrawn;
      let series: SeriesData[];
      try {
        series = this.takePreloaded(created) ?? (await this.fetchSeries(created, null));
      } catch (e) {
        // unread, the charts made are left to the next build (this one made again): their
        // cards stay, empty, until it replaces them
        for (const [id, v] of this.views) {
          if (!created.includes(v)) continue;
          v.dispose();
          this.views.delete(id);
        }
        throw e;
      }
      if (this.disposed) return;
      // the charts out of the window are drawn after the ones in it (drawLater): the page
      // was laid out by fitCharts above, so their boxes cost no layout
      later = created.filter((v) => !inWindow(v.el));
      for (const v of later) v.defer();
      for (const v of created) v.setSeries(series, true);
      for (const s of series) this.noteShown(s);
      // uPlot draws a chart's canvas in a microtask it queued when made: this one runs after
      queueMicrotask(() => performance.mark(MARKS.built));
    }
    // the browser paints the charts' canvases on the next frame: mark them drawn after it
    const shown = created.length - later.length;
    // the charts made again meanwhile: that build marks them
    const build = ++this.builds;
    const current = () => !this.disposed && build === this.builds;
    this.allDrawn = painted().then(async () => {
      if (!current()) return;
      performance.mark(MARKS.drawn);
      // a build that made no chart (one removed) leaves the count of the one that did
      if (created.length) this.grid.dataset.viewDrawn = String(shown);
      const drew = await this.drawLater();
      if (drew && current()) await painted();
      if (!current()) return;
      performance.mark(MARKS.all);
      this.grid.dataset.drawn = "true";
    });
  }

  /**
   * Draw the charts held back (out of the window when made): each one at once when it is
   * scrolled into the window, the rest in the tasks after the window's paint, as many a
   * task as begin within TASK_MS (one task for them all would hold a click or a scroll up
   * for as long).
   * Resolves once every one is drawn (or the view is gone, or the charts were made again:
   * that build draws the rest); true where it drew any.
   */
  private drawLater(): Promise<boolean> {
    this.stopLater();
    const left = [...this.views.values()].filter((v) => v.held);
    if (!left.length) return Promise.resolve(false);
    return new Promise((resolve) => {
      const done = (): void => {
        this.stopLater();
        resolve(true);
      };
      const draw = (v: ChartView): void => {
        v.reveal();
        observer.unobserve(v.el);
        const i = left.indexOf(v);
        if (i >= 0) left.splice(i, 1);
      };
      const observer = new IntersectionObserver((entries) => {
        for (const e of entries) {
          const v = left.find((x) => x.el === e.target);
          if (v && e.isIntersecting) draw(v);
        }
        if (!left.length) done();
      });
      for (const v of left) observer.observe(v.el);
      const next = (): void => {
        this.stopTask = null;
        if (this.disposed) return done();
        // drawn meanwhile (a PNG asked for): nothing left to do for those
        for (const v of left.filter((x) => !x.held)) draw(v);
        // at least one a task; more while the task is under TASK_MS (each task's charts are
        // painted by one frame: a frame a chart cost each its own canvas flush)
        const start = performance.now();
        do {
          const v = left.find((x) => x.held);
          if (!v) break;
          draw(v);
        } while (left.length && performance.now() - start < TASK_MS);
        if (!left.length) return done();
        this.stopTask = nextTask(next);
      };
      this.later = { observer, cancel: () => resolve(true) };
      this.stopTask = nextTask(next);
    });
  }

  /** Stop drawing held-back charts (the charts are made again, or the view is gone); the
   * wait for them ends. */
  private stopLater(): void {
    const later = this.later;
    this.later = null;
    this.stopTask?.();
    this.stopTask = null;
    later?.observer.disconnect();
    later?.cancel();
  }

  private chartCard(chart: Chart): HTMLElement {
    const button = chartButton;
    const reset = button("chart-reset", "Reset zoom", "Zoom back out to the whole runs");
    reset.hidden = true;
    const csv = button("chart-csv", "CSV", "Download the chart's series as CSV");
    const png = button("chart-png", "PNG", "Download the chart as a PNG image");
    const buttons = [reset, csv, png];
    const stem = `compare-${chart.id.replace(/[^A-Za-z0-9._-]+/g, "_")}`;
    reset.addEventListener("click", () => this.views.get(chart.id)?.resetZoom());
    csv.addEventListener("click", () => void this.reads.read(null, { work: () => this.exportCsv(chart.id, `${stem}.csv`), line: this.failure, what: "The chart's CSV could not be read." }));
    png.addEventListener("click", () => {
      const view = this.views.get(chart.id);
      if (view) downloadPng(`${stem}.png`, view);
    });
    if (chart.extra) {
      const remove = button("chart-remove", "×", "Remove this chart");
      remove.addEventListener("click", () => this.setKeys(this.state.keys.filter((k) => `key:${k}` !== chart.id)));
      buttons.push(remove);
    }
    return h(
      "div",
      { class: "chart-card", "data-chart-card": chart.id },
      h("div", { class: "chart-head" }, h("h4", { title: [...new Set(chart.lines.map((l) => l.key))].join(", ") }, chart.title), h("div", { class: "chart-buttons" }, ...buttons)),
      chart.logged ? null : h("p", { class: "muted" }, "No compared run logged this key."),
      h("div", { class: "chart", "data-chart": chart.id }),
    );
  }

  /** A chart's lines over its zoom range, at up to the server's most points per series. */
  private async exportCsv(id: string, filename: string): Promise<void> {
    const view = this.views.get(id);
    if (!view) return;
    // the CSV has each downsampled line's min and max beside it
    const series = await this.fetchSeries([view], view.zoomed, EXPORT_POINTS, true);
    const { header, rows } = seriesTable(view.lines, series);
    downloadCsv(filename, header, rows);
  }

  /** The preloaded series (once) if they hold every line of `views` some run logged. */
  private takePreloaded(views: ChartView[]): SeriesData[] | null {
    const series = this.preloaded;
    this.preloaded = null;
    if (!series) return null;
    const held = new Set(series.map((s) => lineKey(s.run, s.key)));
    const logged = (l: ResolvedLine) => this.runs.find((r) => r.run.run_id === l.run)?.keys.has(l.key);
    return views.every((v) => v.lines.every((l) => !logged(l) || held.has(lineKey(l.run ?? "", l.key)))) ? series : null;
  }

  /**
   * The series of `views`' keys for every run: in one request while runs × keys fit the
   * server's limit, so that every run's series share the bucket edges; past it, one request
   * per group of whole charts (each chart's runs still share them).
   */
  private async fetchSeries(views: ChartView[], range: { lo: number; hi: number } | null, points = this.budget(), bands = false): Promise<SeriesData[]> {
    const runs = [...new Set(views.flatMap((v) => v.lines.map((l) => l.run ?? "")))].filter(Boolean);
    if (!runs.length) return [];
    const groups: string[][] = [];
    let keys = new Set<string>();
    for (const v of views) {
      const more = new Set([...keys, ...v.keys]);
      if (keys.size && more.size * runs.length > MAX_SERIES) {
        groups.push([...keys]);
        keys = new Set(v.keys);
      } else {
        keys = more;
      }
    }
    if (keys.size) groups.push([...keys]);
    const answers = await Promise.all(groups.map((g) => getJSON<SeriesResponse>(seriesPath(runs, g, range, points, false, bands))));
    return answers.flatMap((a) => a.series);
  }

  /** Points per series: about one per pixel of plot width. */
  private budget(): number {
    const width = this.grid.querySelector<HTMLElement>(".chart")?.clientWidth || this.grid.clientWidth / 2;
    return pointBudget(width);
  }

  private noteShown(s: SeriesData): void {
    const run = this.runs.find((r) => r.run.run_id === s.run);
    const last = s.step.length ? s.step[s.step.length - 1] : -1;
    if (run && last > (run.shownTo.get(s.key) ?? -1)) run.shownTo.set(s.key, last);
  }

  private zoom(id: string, view: ChartView, range: { lo: number; hi: number } | null): void {
    const reset = view.el.parentElement?.querySelector<HTMLElement>(".chart-reset");
    if (reset) reset.hidden = range === null;
    void this.reads.read(`zoom:${id}`, { work: () => this.loadWindow(id), line: this.failure });
  }

  /** A chart's series over the window it shows now (zoomed, or the whole runs). */
  private async loadWindow(id: string): Promise<void> {
    const view = this.views.get(id);
    if (!view) return;
    const range = view.zoomed;
    const series = await this.fetchSeries([view], range);
    // made or zoomed again meanwhile: the read of that shows it
    if (!this.disposed && this.views.get(id) === view && view.zoomed === range) view.setSeries(series);
  }

  /** A run's list fields changed (the run-list stream): its chip, and polling once it ends. */
  update(run: RunSummary): void {
    const r = this.runs.find((x) => x.run.run_id === run.run_id);
    if (!r) return;
    r.run = run;
    if (TERMINAL_PHASES.includes(run.status)) r.pollsLeft = Math.min(r.pollsLeft, POLLS_AFTER_END);
    else if (r.pollsLeft <= 0) {
      r.pollsLeft = Infinity;
      this.reads.wake();
    }
    this.showChips();
  }

  /**
   * Read the runs still going: their keys tell which have new points; those come in one
   * request per run from the first step not shown, and are appended. A new key that adds
   * a chart, or more new points than a full series holds, builds the charts again.
   */
  private async poll(): Promise<void> {
    const polled = this.runs.filter((r) => r.pollsLeft > 0);
    const fresh = await Promise.all(polled.map((r) => getJSON<MetricKeys>(`${runPath(r.run.run_id)}/metrics/keys`)));
    if (this.disposed) return;
    let layoutChanged = false;
    let lossLogged = false;
    const tails: Promise<void>[] = [];
    polled.forEach((r, i) => {
      const keys = presentKeys(fresh[i].keys);
      if ([...keys].some((k) => !r.keys.has(k))) layoutChanged = true;
      if (findKey(r.keys, "train_loss") === undefined && findKey(keys, "train_loss") !== undefined) lossLogged = true;
      r.keys = keys;
      r.counts = keyCounts(fresh[i].keys);
      const shown = new Set(this.shownKeys(r.run.run_id));
      const behind = fresh[i].keys.filter((k) => shown.has(k.key) && k.last_step !== null && k.last_step > (r.shownTo.get(k.key) ?? -1));
      if (behind.length) tails.push(this.appendTail(r, behind));
      else if (Number.isFinite(r.pollsLeft)) r.pollsLeft -= 1;
    });
    if (layoutChanged) await this.buildCharts();
    // a run that logs its first training loss can now be compared: the report said it could not
    if (lossLogged && this.el.dataset.loaded && this.runs.length >= 2) void this.loadReport();
    await Promise.all(tails);
  }

  private shownKeys(runId: string): string[] {
    return [...this.views.values()].flatMap((v) => v.lines.filter((l) => l.run === runId).map((l) => l.key));
  }

  private async appendTail(r: Compared, behind: MetricKey[]): Promise<void> {
    const lo = Math.min(...behind.map((k) => (r.shownTo.get(k.key) ?? -1) + 1));
    const hi = Math.max(...behind.map((k) => k.last_step ?? lo));
    const resp = await getJSON<SeriesResponse>(seriesPath([r.run.run_id], behind.map((k) => k.key), { lo, hi }, MAX_POINTS, false, false));
    if (this.disposed) return;
    if (resp.series.some((s) => !s.full)) {
      // more new points than one request holds whole: load every chart again
      const views = [...this.views.values()];
      const series = await this.fetchSeries(views, null);
      if (this.disposed) return;
      for (const v of views) v.setSeries(series);
      for (const s of series) this.noteShown(s);
      return;
    }
    for (const s of resp.series) {
      const from = r.shownTo.get(s.key) ?? -1;
      const views = [...this.views.values()].filter((v) => v.lines.some((l) => l.run === s.run && l.key === s.key));
      s.step.forEach((step, j) => {
        if (step <= from) return;
        for (const v of views) v.append(s.key, step, s.value[j], s.run);
      });
      this.noteShown(s);
    }
  }

  dispose(): void {
    this.disposed = true;
    this.stopLater();
    this.reads.dispose();
    this.resizeObserver.disconnect();
    for (const v of this.views.values()) v.dispose();
    this.views.clear();
  }
}

// the held-back charts drawn in one task: more while it has run less than this
const TASK_MS = 50;

/** Whether any of `el`'s box lies in the window. */
function inWindow(el: HTMLElement): boolean {
  const r = el.getBoundingClientRect();
  return r.bottom > 0 && r.right > 0 && r.top < window.innerHeight && r.left < window.innerWidth;
}

/** `fn` in a task of its own after those already queued (a message the page posts itself:
 * a timer of 0 can wait 4 ms and more); the function returned cancels it. */
function nextTask(fn: () => void): () => void {
  const channel = new MessageChannel();
  let live = true;
  channel.port1.onmessage = () => {
    channel.port1.close();
    if (live) fn();
  };
  channel.port2.postMessage(null);
  return () => {
    live = false;
    channel.port1.close();
  };
}

/** A run's detail, asked for on first use (see fetchRun); a read that failed is made again
 * at the next use. */
function lazyDetail(ident: string): () => Promise<RunDetail> {
  let asked: Promise<RunDetail> | null = null;
  return () =>
    (asked ??= getJSON<RunDetail>(runPath(ident)).catch((e: unknown) => {
      asked = null;
      throw e;
    }));
}

/** "a", "a and b", "a, b and c". */
function listed(names: string[]): string {
  return names.length > 1 ? `${names.slice(0, -1).join(", ")} and ${names[names.length - 1]}` : (names[0] ?? "");
}

function compared(ident: string, run: RunSummary, keys: MetricKey[], detail: () => Promise<RunDetail>): Compared {
  const live = !TERMINAL_PHASES.includes(run.status);
  return { ident, run, detail, keys: presentKeys(keys), counts: keyCounts(keys), shownTo: new Map(), pollsLeft: live ? Infinity : 0 };
}

function keyCounts(keys: MetricKey[]): Map<string, number> {
  return new Map(keys.filter((k) => k.count > 0).map((k) => [k.key, k.count]));
}

function presentKeys(keys: MetricKey[]): Set<string> {
  return new Set(keys.filter((k) => k.count > 0).map((k) => k.key));
}

function chartOf(spec: ChartSpec): Omit<Chart, "lines"> {
  return { id: spec.id, title: spec.title, logY: !!spec.logY, extra: false, logged: true };
}

function sameLines(a: ResolvedLine[], b: ResolvedLine[]): boolean {
  return a.map((l) => lineKey(l.run ?? "", l.key)).join("\t") === b.map((l) => lineKey(l.run ?? "", l.key)).join("\t");
}
