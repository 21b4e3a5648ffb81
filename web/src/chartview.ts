// One ECharts chart: EMA line over a faint raw line, a min/max band where the
// server downsampled, zoom that asks for full resolution, and live appends.

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
import type { ResolvedLine } from "./chartspecs";
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

const PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4b5563", "#ca8a04"];
const SEVERITY_COLOR: Record<string, string> = {
  critical: "rgba(220,38,38,0.15)",
  error: "rgba(220,38,38,0.15)",
  warning: "rgba(234,179,8,0.18)",
  info: "rgba(37,99,235,0.10)",
};

type Pt = [number, number | null];

interface LineData {
  line: ResolvedLine;
  step: number[];
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

/**
 * The min/max band of a downsampled line as one polygon (a custom series), which costs
 * one shape instead of two stacked line series. Two data items carry the band's
 * extent so the axes make room for it; only the first draws.
 */
function bandSeries(i: number, color: string, step: number[], min: (number | null)[], max: (number | null)[]): Record<string, unknown> {
  let lo = Infinity;
  let hi = -Infinity;
  for (let j = 0; j < step.length; j++) {
    if (min[j] !== null && (min[j] as number) < lo) lo = min[j] as number;
    if (max[j] !== null && (max[j] as number) > hi) hi = max[j] as number;
  }
  const extent = Number.isFinite(lo) ? [[step[0], lo], [step[step.length - 1], hi]] : [];
  return {
    type: "custom",
    id: `band-${i}`,
    silent: true,
    clip: true,
    tooltip: { show: false },
    data: extent,
    renderItem: (params: { dataIndex: number }, api: { coord: (v: [number, number]) => number[] }) => {
      if (params.dataIndex !== 0) return null;
      const upper: number[][] = [];
      const lower: number[][] = [];
      for (let j = 0; j < step.length; j++) {
        if (min[j] === null || max[j] === null) continue;
        upper.push(api.coord([step[j], max[j] as number]));
        lower.push(api.coord([step[j], min[j] as number]));
      }
      return { type: "polygon", shape: { points: upper.concat(lower.reverse()) }, style: { fill: color, opacity: 0.15 } };
    },
  };
}

function axisNumber(v: number): string {
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e5)) return v.toExponential(0);
  return String(Number(v.toPrecision(4)));
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
  zoomed: { lo: number; hi: number } | null = null;

  constructor(
    el: HTMLElement,
    readonly lines: ResolvedLine[],
    private readonly logY: boolean,
    smoothing: number,
    private readonly onZoom: (range: { lo: number; hi: number } | null) => void,
  ) {
    this.el = el;
    this.smoothing = smoothing;
    this.data = lines.map((line) => ({ line, step: [], value: [], min: null, max: null, full: true, count: 0 }));
    this.chart = echarts.init(el, undefined, { renderer: "canvas" });
    this.chart.on("datazoom", () => this.zoomChanged());
  }

  get keys(): string[] {
    return this.lines.map((l) => l.key);
  }

  /**
   * Replace the data of every line with a server response. With `keepNewer` (a chart's
   * first load, which live points may overtake while it is fetched), the points already
   * appended past the response's last step stay after it.
   */
  setSeries(series: SeriesData[], keepNewer = false): void {
    for (const d of this.data) {
      const s = series.find((x) => x.key === d.line.key && (d.line.run === undefined || x.run === d.line.run));
      if (!s) continue;
      const last = s.step.length ? s.step[s.step.length - 1] : -Infinity;
      const newer = keepNewer ? d.step.flatMap((step, i) => (step > last ? [[step, d.value[i]] as const] : [])) : [];
      d.step = s.step.slice();
      d.value = s.value.slice();
      d.full = s.full;
      d.min = s.full || !s.min ? null : s.min.slice();
      d.max = s.full || !s.max ? null : s.max.slice();
      d.count = s.count;
      for (const [step, value] of newer) this.push(d, step, value);
    }
    this.render(true);
  }

  /** Append one live point; the redraw is batched to the next animation frame. */
  append(key: string, step: number, value: number | null, run?: string): void {
    const d = this.data.find((x) => x.line.key === key && (run === undefined || x.line.run === undefined || x.line.run === run));
    if (!d) return;
    const n = d.step.length;
    if (n > 0 && step <= d.step[n - 1]) {
      // a step logged again (a restored run) replaces the newer tail
      let i = n;
      while (i > 0 && d.step[i - 1] >= step) i--;
      d.step.length = i;
      d.value.length = i;
      if (d.min && d.max) {
        d.min.length = i;
        d.max.length = i;
      }
    }
    this.push(d, step, value);
    this.schedule();
  }

  private push(d: LineData, step: number, value: number | null): void {
    d.step.push(step);
    d.value.push(value);
    if (d.min && d.max) {
      d.min.push(value);
      d.max.push(value);
    }
    d.count += 1;
  }

  setSmoothing(weight: number): void {
    this.smoothing = weight;
    this.render(false);
  }

  setFindings(findings: Finding[], redraw = true): void {
    const keys = new Set(this.keys);
    this.findings = findings.filter((f) => f.metrics.some((m) => keys.has(m)) && f.first_step !== null);
    if (redraw) this.render(false);
  }

  resize(): void {
    this.chart.resize();
  }

  dispose(): void {
    window.clearTimeout(this.zoomTimer);
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

  private zoomChanged(): void {
    window.clearTimeout(this.zoomTimer);
    this.zoomTimer = window.setTimeout(() => {
      const opt = this.chart.getOption() as { dataZoom?: { start?: number; end?: number; startValue?: number; endValue?: number }[] };
      const z = opt.dataZoom?.[0];
      if (!z) return;
      if ((z.start ?? 0) <= 0 && (z.end ?? 100) >= 100) {
        this.zoomed = null;
      } else if (z.startValue !== undefined && z.endValue !== undefined) {
        this.zoomed = { lo: Math.floor(z.startValue), hi: Math.ceil(z.endValue) };
      }
      this.onZoom(this.zoomed);
    }, 250);
  }

  private render(full: boolean): void {
    // axes must exist before any series update
    full = full || !this.initialized;
    this.initialized = true;
    const series: Record<string, unknown>[] = [];
    this.data.forEach((d, i) => {
      const color = PALETTE[i % PALETTE.length];
      const values = this.logY ? d.value.map((v) => (v !== null && v > 0 ? v : null)) : d.value;
      const raw: Pt[] = d.step.map((s, j) => [s, values[j]]);
      const smooth = ema(values, this.smoothing);
      const main: Pt[] = d.step.map((s, j) => [s, smooth[j]]);
      if (d.min && d.max && !this.logY) series.push(bandSeries(i, color, d.step, d.min, d.max));
      series.push({
        type: "line", id: `raw-${i}`, name: `${d.line.label} (raw)`, symbol: "none", color,
        lineStyle: { width: 1, opacity: this.smoothing > 0 ? 0.25 : 1 }, data: raw, connectNulls: false,
        tooltip: { show: false },
      });
      series.push({
        type: "line", id: `ema-${i}`, name: d.line.label, symbol: d.step.length === 1 ? "circle" : "none", color,
        lineStyle: { width: 2, opacity: this.smoothing > 0 ? 1 : 0 }, data: main,
        markArea: i === 0 ? this.markArea() : undefined,
      });
    });
    const option: Record<string, unknown> = { series };
    if (full) {
      Object.assign(option, {
        animation: false,
        grid: { left: 64, right: 16, top: this.lines.length > 1 ? 30 : 12, bottom: 52 },
        legend: this.lines.length > 1 ? { top: 0, data: this.lines.map((l) => l.label) } : undefined,
        tooltip: { trigger: "axis", valueFormatter: (v: unknown) => (typeof v === "number" ? v.toPrecision(5) : "—") },
        xAxis: { type: "value", name: "step", nameLocation: "middle", nameGap: 22, min: "dataMin", max: "dataMax" },
        yAxis: { type: this.logY ? "log" : "value", scale: true, axisLabel: { formatter: axisNumber } },
        dataZoom: [
          { type: "inside", xAxisIndex: 0, filterMode: "none" },
          { type: "slider", xAxisIndex: 0, filterMode: "none", height: 14, bottom: 4 },
        ],
      });
    }
    this.chart.setOption(option, { replaceMerge: full ? ["series"] : [] });
    this.el.dataset.points = String(this.data[0]?.step.length ?? 0);
    this.el.dataset.counts = this.data.map((d) => `${d.line.key}=${d.step.length}`).join(";");
    this.el.dataset.full = this.data.every((d) => d.full) ? "true" : "false";
    this.el.dataset.markers = String(this.findings.length);
  }

  private markArea(): Record<string, unknown> | undefined {
    if (!this.findings.length) return undefined;
    return {
      silent: false,
      data: this.findings.map((f) => [
        { name: f.title, xAxis: f.first_step, itemStyle: { color: SEVERITY_COLOR[f.severity] ?? SEVERITY_COLOR.info } },
        { xAxis: Math.max(f.last_step ?? f.first_step ?? 0, (f.first_step ?? 0) + 0.5) },
      ]),
    };
  }
}
