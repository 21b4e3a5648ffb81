// The compare view, /compare?run=A&run=B…[&key=K…][&baseline=B&subject=A][&across_plans=1][&only_diff=1]:
// the runs overlaid on the same charts, fetched in one series request so that every run
// shares the server's bucket edges; the `runs compare` report of one run against a
// baseline; and a table of their settings with the differences marked. Runs that are
// still going are read again every POLL_MS: their new points are appended to the charts.

import "./compare.css";
import { getJSON, runPath } from "./api";
import { MAX_POINTS } from "./charts";
import { CHARTS, resolveLines, type ChartSpec, type ResolvedLine } from "./chartspecs";
import { ChartView } from "./chartview";
import { CompareReport } from "./comparereport";
import { ConfigTable } from "./configtable";
import { h } from "./dom";
import { statusClass, statusText } from "./format";
import { TERMINAL_PHASES } from "./format.gen";
import type { MetricKey, MetricKeys, RunDetail, RunSummary, SeriesData, SeriesResponse } from "./types";

export interface CompareState {
  runs: string[];
  /** Keys charted besides the standard charts: one chart each, a line per run. */
  keys: string[];
  baseline: string | null;
  subject: string | null;
  acrossPlans: boolean;
  onlyDiff: boolean;
}

export function readCompareState(p: URLSearchParams): CompareState {
  return {
    runs: [...new Set(p.getAll("run").filter(Boolean))],
    keys: [...new Set(p.getAll("key").filter(Boolean))],
    baseline: p.get("baseline"),
    subject: p.get("subject"),
    acrossPlans: p.get("across_plans") === "1",
    onlyDiff: p.get("only_diff") === "1",
  };
}

export function writeCompareState(s: CompareState, p: URLSearchParams): void {
  for (const r of s.runs) p.append("run", r);
  for (const k of s.keys) p.append("key", k);
  if (s.baseline) p.set("baseline", s.baseline);
  if (s.subject) p.set("subject", s.subject);
  if (s.acrossPlans) p.set("across_plans", "1");
  if (s.onlyDiff) p.set("only_diff", "1");
}

const POLL_MS = 2000;
// polls of a run after it ended: its last points may be indexed after its end
const POLLS_AFTER_END = 2;
const SMOOTHING_KEY = "runwatch.smoothing";

/** One compared run: its detail and keys, and the last step each key is shown up to. */
interface Compared {
  ident: string;
  detail: RunDetail;
  keys: Set<string>;
  shownTo: Map<string, number>;
  pollsLeft: number;
}

interface Chart {
  id: string;
  title: string;
  lines: ResolvedLine[];
  logY: boolean;
  extra: boolean;
}

const lineKey = (run: string, key: string) => `${run}\n${key}`;

export class CompareView {
  readonly el = h("main", { class: "detail compare", id: "compare" });
  private runs: Compared[] = [];
  private views = new Map<string, ChartView>();
  private grid = h("div", { class: "chart-row", id: "compare-charts" });
  private notice = h("div", { class: "notice", role: "status" });
  private chips = h("ul", { class: "compare-runs", id: "compare-runs" });
  private keyInput = h("input", { id: "compare-key", list: "compare-key-list", placeholder: "Chart another key…", "aria-label": "Metric key to chart" });
  private keyList = h("datalist", { id: "compare-key-list" });
  private smoothing: number;
  private resizeObserver: ResizeObserver;
  private config: ConfigTable;
  private report: CompareReport;
  private timer: number | undefined;
  private disposed = false;

  constructor(
    private state: CompareState,
    private readonly onState: (s: CompareState) => void,
    private readonly onOpenRun: (runId: string) => void,
  ) {
    const stored = Number(localStorage.getItem(SMOOTHING_KEY) ?? "0.6");
    this.smoothing = Number.isFinite(stored) ? Math.min(Math.max(stored, 0), 0.99) : 0.6;
    this.config = new ConfigTable(state.onlyDiff, (onlyDiff) => this.setState({ onlyDiff }));
    this.report = new CompareReport((baseline, subject, acrossPlans) => this.setState({ baseline, subject, acrossPlans }));
    this.resizeObserver = new ResizeObserver(() => {
      for (const v of this.views.values()) v.resize();
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
    const loaded = await Promise.allSettled(this.state.runs.map((ident) => this.fetchRun(ident)));
    if (this.disposed) return;
    const missing: string[] = [];
    loaded.forEach((r, i) => {
      if (r.status === "fulfilled") this.runs.push(r.value);
      else missing.push(`${this.state.runs[i]} (${r.reason instanceof Error ? r.reason.message : String(r.reason)})`);
    });
    if (missing.length) {
      this.notice.classList.add("error");
      this.notice.textContent = `Not compared: ${missing.join("; ")}`;
    }
    this.el.replaceChildren(this.head(), this.notice, this.chartsCard(), this.report.el, this.config.el);
    this.showChips();
    this.showKeyChoices();
    const ids = this.runs.map((r) => r.detail.run_id);
    const baseline = this.pick(this.state.baseline) ?? ids[0];
    const subject = this.pick(this.state.subject) ?? ids.find((id) => id !== baseline);
    this.report.show(this.runs.map((r) => r.detail.run), baseline ?? null, subject ?? null, this.state.acrossPlans);
    this.config.show(this.runs.map((r) => r.detail));
    await this.buildCharts();
    if (!this.disposed) this.el.dataset.loaded = "true";
    this.schedulePoll();
  }

  /** The run id of a run named in the URL (by id or name), if it is compared. */
  private pick(ident: string | null): string | undefined {
    if (!ident) return undefined;
    return this.runs.find((r) => r.ident === ident || r.detail.run_id === ident || r.detail.name === ident)?.detail.run_id;
  }

  private async fetchRun(ident: string): Promise<Compared> {
    const [detail, keys] = await Promise.all([
      getJSON<RunDetail>(runPath(ident)),
      getJSON<MetricKeys>(`${runPath(ident)}/metrics/keys`),
    ]);
    const live = !TERMINAL_PHASES.includes(detail.run.status);
    return { ident, detail, keys: presentKeys(keys.keys), shownTo: new Map(), pollsLeft: live ? Infinity : 0 };
  }

  private head(): HTMLElement {
    return h(
      "header",
      { class: "detail-head" },
      h("div", { class: "title-row" }, h("h2", {}, `Compare ${this.runs.length} runs`)),
      this.chips,
    );
  }

  private showChips(): void {
    this.chips.replaceChildren(
      ...this.runs.map((r) => {
        const run = r.detail.run;
        const open = h("a", { href: `/runs?run=${encodeURIComponent(run.run_id)}`, class: "chip-name" }, run.name);
        open.addEventListener("click", (e) => {
          e.preventDefault();
          this.onOpenRun(run.run_id);
        });
        const remove = h("button", { class: "chip-remove", title: `Leave ${run.name} out`, "aria-label": `Leave ${run.name} out` }, "×");
        remove.addEventListener("click", () => this.setState({ runs: this.state.runs.filter((x) => x !== r.ident) }));
        return h("li", { class: "compare-chip", "data-run": run.run_id }, open, " ", h("span", { class: `status ${statusClass(run.status)}` }, h("span", { class: "dot" }), statusText(run)), remove);
      }),
    );
  }

  private chartsCard(): HTMLElement {
    const slider = h("input", { type: "range", min: "0", max: "0.99", step: "0.01", value: String(this.smoothing), "aria-label": "Smoothing" });
    slider.addEventListener("input", () => {
      this.smoothing = Number(slider.value);
      localStorage.setItem(SMOOTHING_KEY, slider.value);
      for (const v of this.views.values()) v.setSmoothing(this.smoothing);
    });
    const add = h("button", { class: "btn", id: "compare-add-key" }, "Add chart");
    const addKey = () => {
      const key = this.keyInput.value.trim();
      if (!key || this.state.keys.includes(key)) return;
      this.keyInput.value = "";
      this.setState({ keys: [...this.state.keys, key] });
      void this.buildCharts();
    };
    add.addEventListener("click", addKey);
    this.keyInput.addEventListener("keydown", (e) => {
      if (e.key === "Enter") addKey();
    });
    return h(
      "section",
      { class: "card charts" },
      h("div", { class: "card-head" }, h("h3", {}, "Metrics"), h("div", { class: "controls" }, this.keyInput, this.keyList, add, h("label", { class: "smoothing" }, "Smoothing ", slider))),
      this.grid,
    );
  }

  private showKeyChoices(): void {
    const all = new Set(this.runs.flatMap((r) => [...r.keys]));
    this.keyList.replaceChildren(...[...all].sort().map((k) => h("option", { value: k })));
  }

  /** The charts: each standard chart that every run has a line for, then the added keys. */
  private charts(): Chart[] {
    const label = (r: Compared, l: string) => `${r.detail.name} · ${l}`;
    const out: Chart[] = [];
    for (const spec of CHARTS) {
      const perRun = this.runs.map((r) => resolveLines(spec, r.keys));
      if (!perRun.length || perRun.some((lines) => !lines.length)) continue;
      out.push({ ...chartOf(spec), lines: this.runs.flatMap((r, i) => perRun[i].map((l) => ({ label: label(r, l.label), key: l.key, run: r.detail.run_id }))) });
    }
    for (const key of this.state.keys) {
      const lines = this.runs.filter((r) => r.keys.has(key)).map((r) => ({ label: label(r, key), key, run: r.detail.run_id }));
      out.push({ id: `key:${key}`, title: key, lines, logY: false, extra: true });
    }
    return out;
  }

  /** Create the charts whose lines changed (all at first) and load them in one request. */
  private async buildCharts(): Promise<void> {
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
      const oldCard = this.grid.querySelector(`[data-chart-card="${CSS.escape(chart.id)}"]`);
      old?.dispose();
      if (oldCard) oldCard.replaceWith(card);
      else this.grid.appendChild(card);
      const box = card.querySelector(".chart") as HTMLElement;
      const view = new ChartView(box, chart.lines, chart.logY, this.smoothing, (range) => void this.zoom(view, range));
      this.views.set(chart.id, view);
      created.push(view);
    }
    if (!wanted.length) {
      this.grid.replaceChildren(h("p", { class: "muted empty" }, "These runs have no chart in common: add a key above."));
    } else {
      this.grid.querySelector(".empty")?.remove();
    }
    if (created.length) {
      delete this.grid.dataset.drawn;
      const series = await this.fetchSeries(created, null);
      if (this.disposed) return;
      for (const v of created) v.setSeries(series, true);
    }
    // ECharts paints on the next animation frame; mark the charts drawn after it
    requestAnimationFrame(() => requestAnimationFrame(() => {
      if (!this.disposed) this.grid.dataset.drawn = "true";
    }));
  }

  private chartCard(chart: Chart): HTMLElement {
    const title = h("h4", {}, chart.title);
    if (chart.extra) {
      const remove = h("button", { class: "chip-remove", title: `Remove the chart of ${chart.title}`, "aria-label": `Remove the chart of ${chart.title}` }, "×");
      remove.addEventListener("click", () => {
        this.setState({ keys: this.state.keys.filter((k) => `key:${k}` !== chart.id) });
        void this.buildCharts();
      });
      title.append(" ", remove);
    }
    const box = h("div", { class: "chart", "data-chart": chart.id });
    if (!chart.lines.length) box.append(h("p", { class: "muted" }, "No compared run logged this key."));
    return h("div", { class: "chart-card", "data-chart-card": chart.id }, title, box);
  }

  /** The series of `views`' keys for every run, in one request: shared bucket edges. */
  private async fetchSeries(views: ChartView[], range: { lo: number; hi: number } | null): Promise<SeriesData[]> {
    const keys = [...new Set(views.flatMap((v) => v.keys))];
    const runs = [...new Set(views.flatMap((v) => v.lines.map((l) => l.run ?? "")))].filter(Boolean);
    if (!keys.length || !runs.length) return [];
    const q = new URLSearchParams();
    for (const r of runs) q.append("run", r);
    for (const k of keys) q.append("key", k);
    q.set("points", String(this.budget()));
    if (range) {
      q.set("lo", String(range.lo));
      q.set("hi", String(range.hi));
    }
    const resp = await getJSON<SeriesResponse>(`/series?${q.toString()}`);
    if (!range) for (const s of resp.series) this.noteShown(s);
    return resp.series;
  }

  /** Points per series: about one per pixel of plot width. */
  private budget(): number {
    const width = this.grid.querySelector<HTMLElement>(".chart")?.clientWidth || this.grid.clientWidth / 2;
    return Math.max(300, Math.min(MAX_POINTS, Math.round(width)));
  }

  private noteShown(s: SeriesData): void {
    const run = this.runs.find((r) => r.detail.run_id === s.run);
    const last = s.step.length ? s.step[s.step.length - 1] : -1;
    if (run && last > (run.shownTo.get(s.key) ?? -1)) run.shownTo.set(s.key, last);
  }

  private async zoom(view: ChartView, range: { lo: number; hi: number } | null): Promise<void> {
    const series = await this.fetchSeries([view], range);
    if (!this.disposed) view.setSeries(series);
  }

  /** A run's list fields changed (the run-list stream): its chip, and polling once it ends. */
  update(run: RunSummary): void {
    const r = this.runs.find((x) => x.detail.run_id === run.run_id);
    if (!r) return;
    r.detail = { ...r.detail, run };
    if (TERMINAL_PHASES.includes(run.status)) r.pollsLeft = Math.min(r.pollsLeft, POLLS_AFTER_END);
    else if (r.pollsLeft <= 0) {
      r.pollsLeft = Infinity;
      this.schedulePoll();
    }
    this.showChips();
  }

  private schedulePoll(): void {
    window.clearTimeout(this.timer);
    if (this.disposed || !this.runs.some((r) => r.pollsLeft > 0)) return;
    this.timer = window.setTimeout(() => {
      this.poll()
        .catch((e: unknown) => console.warn("compare: reading new points failed", e))
        .finally(() => this.schedulePoll());
    }, POLL_MS);
  }

  /**
   * Read the runs still going: their keys tell which have new points; those come in one
   * request per run from the first step not shown, and are appended. A new key that adds
   * a chart, or more new points than a full series holds, builds the charts again.
   */
  private async poll(): Promise<void> {
    const polled = this.runs.filter((r) => r.pollsLeft > 0);
    const fresh = await Promise.all(polled.map((r) => getJSON<MetricKeys>(`${runPath(r.detail.run_id)}/metrics/keys`)));
    if (this.disposed) return;
    let layoutChanged = false;
    const tails: Promise<void>[] = [];
    polled.forEach((r, i) => {
      const keys = presentKeys(fresh[i].keys);
      if ([...keys].some((k) => !r.keys.has(k))) layoutChanged = true;
      r.keys = keys;
      const shown = new Set(this.shownKeys(r.detail.run_id));
      const behind = fresh[i].keys.filter((k) => shown.has(k.key) && k.last_step !== null && k.last_step > (r.shownTo.get(k.key) ?? -1));
      if (behind.length) tails.push(this.appendTail(r, behind));
      else if (Number.isFinite(r.pollsLeft)) r.pollsLeft -= 1;
    });
    if (layoutChanged) {
      this.showKeyChoices();
      await this.buildCharts();
    }
    await Promise.all(tails);
  }

  private shownKeys(runId: string): string[] {
    return [...this.views.values()].flatMap((v) => v.lines.filter((l) => l.run === runId).map((l) => l.key));
  }

  private async appendTail(r: Compared, behind: MetricKey[]): Promise<void> {
    const lo = Math.min(...behind.map((k) => (r.shownTo.get(k.key) ?? -1) + 1));
    const q = new URLSearchParams({ run: r.detail.run_id, points: String(MAX_POINTS), lo: String(lo) });
    for (const k of behind) q.append("key", k.key);
    const resp = await getJSON<SeriesResponse>(`/series?${q.toString()}`);
    if (this.disposed) return;
    if (resp.series.some((s) => !s.full)) {
      // more new points than one request holds whole: load every chart again
      const views = [...this.views.values()];
      const series = await this.fetchSeries(views, null);
      if (!this.disposed) for (const v of views) if (!v.zoomed) v.setSeries(series);
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
    window.clearTimeout(this.timer);
    this.resizeObserver.disconnect();
    for (const v of this.views.values()) v.dispose();
    this.views.clear();
  }
}

function presentKeys(keys: MetricKey[]): Set<string> {
  return new Set(keys.filter((k) => k.count > 0).map((k) => k.key));
}

function chartOf(spec: ChartSpec): Omit<Chart, "lines"> {
  return { id: spec.id, title: spec.title, logY: !!spec.logY, extra: false };
}

function sameLines(a: ResolvedLine[], b: ResolvedLine[]): boolean {
  return a.map((l) => lineKey(l.run ?? "", l.key)).join("\t") === b.map((l) => lineKey(l.run ?? "", l.key)).join("\t");
}
