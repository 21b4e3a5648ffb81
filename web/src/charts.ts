// The charts section of a run: resolves which charts to draw from the run's
// metric keys, loads them with one downsampled request, and applies live points.

import { getJSON } from "./api";
import { CHARTS, GROUPS, resolveLines } from "./chartspecs";
import { ChartView } from "./chartview";
import { clear, h } from "./dom";
import type { Finding, MetricKey, PointsEvent, SeriesResponse } from "./types";

// A chart cannot show more distinct points than it is pixels wide; the server never
// sends more than this per series.
export const MAX_POINTS = 1000;
const MIN_POINTS = 300;
const SMOOTHING_KEY = "runwatch.smoothing";

function seriesPath(runId: string, keys: string[], range: { lo: number; hi: number } | null, points: number): string {
  const q = new URLSearchParams();
  q.append("run", runId);
  for (const k of keys) q.append("key", k);
  q.set("points", String(points));
  if (range) {
    q.set("lo", String(range.lo));
    q.set("hi", String(range.hi));
  }
  return `/series?${q.toString()}`;
}

export class ChartsPanel {
  readonly el: HTMLElement;
  private views = new Map<string, ChartView>();
  private knownKeys = new Set<string>();
  private smoothing: number;
  private findings: Finding[] = [];
  private grid = h("div", { class: "chart-groups" });
  private resizeObserver: ResizeObserver;
  private disposed = false;

  constructor(private readonly runId: string) {
    const stored = Number(localStorage.getItem(SMOOTHING_KEY) ?? "0.6");
    this.smoothing = Number.isFinite(stored) ? Math.min(Math.max(stored, 0), 0.99) : 0.6;
    const slider = h("input", { type: "range", min: "0", max: "0.99", step: "0.01", value: String(this.smoothing), "aria-label": "Smoothing" });
    const shown = h("span", { class: "muted" }, this.smoothing.toFixed(2));
    slider.addEventListener("input", () => {
      this.smoothing = Number(slider.value);
      shown.textContent = this.smoothing.toFixed(2);
      localStorage.setItem(SMOOTHING_KEY, slider.value);
      for (const v of this.views.values()) v.setSmoothing(this.smoothing);
    });
    this.el = h(
      "section",
      { class: "card charts", id: "charts" },
      h("div", { class: "card-head" }, h("h3", {}, "Metrics"), h("label", { class: "smoothing" }, "Smoothing ", slider, " ", shown)),
      this.grid,
    );
    this.resizeObserver = new ResizeObserver(() => {
      for (const v of this.views.values()) v.resize();
    });
    this.resizeObserver.observe(this.grid);
  }

  async load(keys: MetricKey[]): Promise<void> {
    this.knownKeys = new Set(keys.filter((k) => k.count > 0).map((k) => k.key));
    await this.build();
  }

  /** Create the charts whose lines changed with the known keys, and load their data. */
  private async build(): Promise<void> {
    const created: ChartView[] = [];
    for (const spec of CHARTS) {
      const lines = resolveLines(spec, this.knownKeys);
      const old = this.views.get(spec.id);
      if (!lines.length || (old && old.keys.join("\n") === lines.map((l) => l.key).join("\n"))) continue;
      const box = h("div", { class: "chart", "data-chart": spec.id });
      const card = h("div", { class: "chart-card", "data-chart-card": spec.id }, h("h4", {}, spec.title), box);
      const oldCard = old?.el.parentElement;
      if (old && oldCard) {
        old.dispose();
        oldCard.replaceWith(card);
      } else {
        this.groupEl(spec.group).appendChild(card);
      }
      const view = new ChartView(box, lines, !!spec.logY, this.smoothing, (range) => void this.zoom(view, range));
      this.views.set(spec.id, view);
      created.push(view);
    }
    if (!created.length) {
      if (!this.views.size) this.grid.replaceChildren(h("p", { class: "muted empty" }, "No metrics logged yet."));
      return;
    }
    this.grid.querySelector(".empty")?.remove();
    const keys = created.flatMap((v) => v.keys);
    const resp = await getJSON<SeriesResponse>(seriesPath(this.runId, keys, null, this.budget(created[0])));
    if (this.disposed) return;
    for (const v of created) {
      v.setFindings(this.findings, false);
      v.setSeries(resp.series, true);
    }
    this.grid.dataset.ready = "true";
    // ECharts paints on the next animation frame; mark the charts drawn after it
    requestAnimationFrame(() => requestAnimationFrame(() => (this.grid.dataset.drawn = "true")));
  }

  /** Points per series: about one per pixel of plot width. */
  private budget(view: ChartView): number {
    const width = view.el.clientWidth || this.grid.clientWidth / 2;
    return Math.max(MIN_POINTS, Math.min(MAX_POINTS, Math.round(width)));
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

  private async zoom(view: ChartView, range: { lo: number; hi: number } | null): Promise<void> {
    const resp = await getJSON<SeriesResponse>(seriesPath(this.runId, view.keys, range, this.budget(view)));
    if (!this.disposed) view.setSeries(resp.series);
  }

  /** Apply one live record: append to each chart showing its keys; new keys may add charts. */
  applyPoints(ev: PointsEvent): void {
    let fresh = false;
    for (const [key, value] of Object.entries(ev.values)) {
      if (!this.knownKeys.has(key)) {
        this.knownKeys.add(key);
        fresh = true;
      }
      for (const v of this.views.values()) {
        if (v.keys.includes(key)) v.append(key, ev.step, value);
      }
    }
    if (fresh) void this.build();
  }

  setFindings(findings: Finding[]): void {
    this.findings = findings;
    for (const v of this.views.values()) v.setFindings(findings);
  }

  dispose(): void {
    this.disposed = true;
    this.resizeObserver.disconnect();
    for (const v of this.views.values()) v.dispose();
    this.views.clear();
    clear(this.grid);
  }
}
