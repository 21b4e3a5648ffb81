// The Cost card of the run detail: device time and spend over all attempts (marked as an
// estimate while the run has not ended, and counted on each second from the server's
// figures while its process lives: one whose process is gone stopped at its last record),
// queue wait apart from preparing and training time, the peak of each memory
// part and the data fit the run logged, and each attempt. The run page shows it again
// each time it reads the run's detail (while points arrive, at most once a second).

import { append, h } from "./dom";
import { attemptText, fmtDuration, fmtNum, fmtSpend, statusClass, statusLabel } from "./format";
import { ACTIVE_PHASES, TRAINING_PHASES } from "./format.gen";
import type { Attempt, Pipeline, RunDetail } from "./types";

function seconds(millis: Record<string, number>, ...phases: string[]): number {
  return phases.reduce((sum, p) => sum + (millis[p] ?? 0), 0) / 1000;
}

function fmtBytes(v: number | null): string {
  if (v === null) return "—";
  const gib = v / 1024 ** 3;
  return gib >= 1 ? `${fmtNum(gib, 3)} GiB` : `${fmtNum(v / 1024 ** 2, 3)} MiB`;
}

// What each data_fit/<count> counts (runwatch.metrics: "Data fit").
const DATA_FIT: Record<string, string> = {
  rows: "rows drawn",
  rows_at_max_length: "rows at max_seq_length",
  rows_lost_target_end: "rows that lost their target's end",
  rows_dropped_empty: "rows dropped (nothing to train)",
  padding_fraction: "padding",
};

// A pipeline's stages, first first, each with its device time, then the total: what the
// chain of runs that made this one cost (`runwatch runs get` shows the same).
function pipelineText(p: Pipeline): Node {
  const stages = p.stages.map((s) => `${s.name} ${fmtDuration(s.device_seconds)}`).join(" → ");
  const spend = p.spend === null ? "spend unknown" : `spend ${fmtSpend(p.spend)}`;
  return h("span", { "data-cost": "pipeline" }, `${stages}; total ${fmtDuration(p.device_seconds)} device time, ${spend}${p.estimate ? " (estimate)" : ""}`);
}

// A data fit figure as the card shows it: the padding share as a percent of the
// batches' tokens, a count as a number.
function fitText(key: string, value: number | null): string {
  if (key === "padding_fraction" && value !== null && Number.isFinite(value)) {
    return `${(value * 100).toFixed(1)}% of the batches' tokens`;
  }
  return fmtNum(value);
}

function words(key: string): string {
  return key.replace(/_/g, " ");
}

/** Each attempt: how it ended, its time in each part of the lifecycle, and why it ended. */
function attemptsTable(attempts: Attempt[]): HTMLElement {
  const head = ["Attempt", "Ended", "Queued", "Preparing", "Training", "Device time", "Spend", "Reason"];
  const row = (a: Attempt) =>
    h(
      "tr",
      {},
      h("td", {}, String(a.attempt)),
      h("td", {}, h("span", { class: `status ${statusClass(a.phase)}` }, h("span", { class: "dot" }), a.ended ? statusLabel(a.phase) : `${statusLabel(a.phase)} (open)`)),
      h("td", {}, fmtDuration(seconds(a.phaseMillis, "QUEUED"))),
      h("td", {}, fmtDuration(seconds(a.phaseMillis, "PREPARING"))),
      h("td", {}, fmtDuration(seconds(a.phaseMillis, ...TRAINING_PHASES))),
      h("td", {}, fmtDuration(a.device_seconds)),
      // each attempt at the rate it ran at: a retry after a rate changed costs the new one
      h("td", { "data-attempt-spend": String(a.attempt) }, a.spend === null || a.hourly_rate === null ? "—" : `${fmtSpend(a.spend)} at ${fmtNum(a.hourly_rate)}/h`),
      h("td", { class: "reason-cell" }, a.reason ?? ""),
    );
  return h(
    "div",
    { class: "table-wrap" },
    h("table", { class: "table attempts", id: "cost-attempts" }, h("thead", {}, h("tr", {}, ...head.map((x) => h("th", {}, x)))), h("tbody", {}, ...attempts.map(row))),
  );
}

/** Whether the run's open phase goes on now: it has not ended, and its process has not
 * gone (the server's figures for one that has stop at its last record). */
function counting(d: RunDetail): boolean {
  return d.cost.device_seconds_estimate && !d.run.process_gone;
}

export class CostCard {
  readonly el = h("section", { class: "card", id: "cost" });
  private detail: RunDetail | null = null;
  private at = 0;

  /** Show the cost of `detail`, received at `receivedAt` (ms). */
  show(detail: RunDetail, receivedAt: number): void {
    this.detail = detail;
    this.at = receivedAt;
    this.render();
  }

  /** Count the open phase on to now (called each second while the run is active). */
  tick(): void {
    if (this.detail && counting(this.detail)) this.render();
  }

  private render(): void {
    const d = this.detail;
    if (!d) return;
    const c = d.cost;
    const status = d.run.status;
    const estimate = c.device_seconds_estimate;
    // the server counted the open phase up to when it answered; go on counting from there
    const open = counting(d) ? Math.max(0, Date.now() - this.at) / 1000 : 0;
    const holding = ACTIVE_PHASES.includes(status) ? open : 0;
    const millis = { ...d.timing.phaseMillis };
    if (open) millis[status] = (millis[status] ?? 0) + open * 1000;
    const deviceS = c.device_seconds + holding * c.devices;
    const mark = () => (estimate ? h("span", { class: "estimate", title: "The run has not ended: this grows until it does." }, " (estimate)") : null);
    const spend =
      c.spend === null || c.hourly_rate === null
        ? h("span", { "data-cost": "spend", class: "muted" }, c.problem ?? "unknown")
        : h("span", { "data-cost": "spend" }, fmtSpend(c.spend + (holding * c.devices * c.hourly_rate) / 3600), ` at ${fmtSpend(c.hourly_rate)} per device-hour`, mark());
    const job = d.job;
    const rows: [string, Node | string][] = [
      ["Device time", h("span", { "data-cost": "device-time" }, fmtDuration(deviceS), ` (${c.devices} × ${c.device_profile})`, mark())],
      ["Spend", spend],
      ["Queue wait", h("span", { "data-cost": "queue-wait" }, fmtDuration(seconds(millis, "QUEUED")))],
      ["Preparing", fmtDuration(seconds(millis, "PREPARING"))],
      ["Training", h("span", { "data-cost": "training" }, fmtDuration(seconds(millis, ...TRAINING_PHASES)))],
      ["Attempts", h("span", { "data-cost": "attempts" }, job ? attemptText(Math.max(d.run.attempt, d.attempts.length), job.max_attempts) : String(Math.max(d.run.attempt, d.attempts.length)))],
      ...(c.times ? [["Times", h("span", { "data-cost": "times" }, c.times)] as [string, Node]] : []),
      ...(c.pipeline ? [["Pipeline", pipelineText(c.pipeline)] as [string, Node]] : []),
      ["Last step time", h("span", { "data-cost": "step-time" }, c.last_step_time_s === null ? "—" : `${fmtNum(c.last_step_time_s)} s`)],
      ...Object.entries(c.peak_memory_bytes).map(([k, v]): [string, Node] => [`Peak memory: ${words(k.replace(/_bytes$/, ""))}`, h("span", { "data-memory": k }, fmtBytes(v))]),
      ...Object.entries(c.data_fit ?? {}).map(([k, v]): [string, Node] => [`Data fit: ${DATA_FIT[k] ?? words(k)}`, h("span", { "data-fit": k }, fitText(k, v))]),
    ];
    this.el.replaceChildren();
    // the attempts table needs the pane's width (style.css)
    this.el.classList.toggle("wide", d.attempts.length > 1);
    append(
      this.el,
      h("h3", {}, "Cost"),
      h("dl", { class: "kv" }, ...rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
      d.attempts.length > 1 ? attemptsTable(d.attempts) : null,
    );
  }
}
