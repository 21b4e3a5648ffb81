// The Resources page: the queue (its depth and the jobs waiting, oldest first) and each
// worker with its host, devices in use, device profile (and executor, when Ray), hourly
// rate, running jobs (a lost worker's job that no live worker can reap says what it waits
// for), estimated spend so far and heartbeat age; Stop drains a worker (it finishes its
// jobs, takes no new ones, then exits). Both are asked for again every REFRESH_MS while the
// page is open; ages and spend tick in between.

import { getJSON, postJSON } from "./api";
import { countAnswer, h, reconcile } from "./dom";
import { fmtDuration, fmtSpend, fmtTime, statusClass, statusLabel } from "./format";
import type { RunList, Worker, WorkerAnswer, WorkerList } from "./types";

const REFRESH_MS = 2000;
// How each worker status shows: its words and its dot's colour.
const STATES: Record<string, [string, string]> = {
  active: ["Active", "status-running"],
  draining: ["Stopping: finishing its jobs", "status-cancel_requested"],
  stopped: ["Stopped", "status-cancelled"],
  lost: ["Lost: no heartbeat", "status-failed"],
};

export class ResourcesPage {
  readonly el: HTMLElement;
  private queue = h("p", { class: "queue-depth", id: "queue-depth" });
  private waiting = h("ul", { class: "waiting", id: "waiting" });
  private notice = h("div", { class: "notice", role: "status" });
  private active = h("tbody", { id: "workers" });
  private past = h("tbody", { id: "past-workers" });
  private pastSection: HTMLElement;
  private empty = h("p", { class: "muted", id: "no-workers", hidden: "" }, "No worker is running. ", h("code", {}, "runwatch ui"), " runs one by default; start more with ", h("code", {}, "runwatch worker"), ".");
  private timer: number | undefined;
  private ticker: number | undefined;
  private fetchedAt = 0;
  // reads are numbered as they are asked: an answer older than one shown is dropped (a
  // slow periodic read that left before a Stop would show the worker as it was before)
  private asked = 0;
  private shown = 0;
  private workers: Worker[] = [];
  private disposed = false;

  constructor(private readonly onOpenRun: (runId: string) => void) {
    const head = () =>
      h("thead", {}, h("tr", {}, ...["Worker", "Host", "Devices in use", "Profile", "Rate / device-hour", "Running jobs", "Est. spend so far", "Heartbeat", "State", ""].map((c) => h("th", {}, c))));
    this.pastSection = h("section", { class: "card", hidden: "" }, h("h3", {}, "Past workers"), h("div", { class: "table-wrap" }, h("table", { class: "table workers" }, head(), this.past)));
    this.el = h(
      "div",
      { class: "resources", id: "resources" },
      h("h2", {}, "Resources"),
      this.queue,
      this.waiting,
      this.notice,
      h("section", { class: "card" }, h("h3", {}, "Workers"), this.empty, h("div", { class: "table-wrap" }, h("table", { class: "table workers" }, head(), this.active))),
      this.pastSection,
    );
  }

  async load(): Promise<void> {
    await this.refresh();
    if (this.disposed) return;
    this.timer = window.setInterval(() => void this.refresh(), REFRESH_MS);
    this.ticker = window.setInterval(() => this.render(), 1000);
    this.el.dataset.loaded = "true";
  }

  dispose(): void {
    this.disposed = true;
    window.clearInterval(this.timer);
    window.clearInterval(this.ticker);
  }

  private async refresh(): Promise<void> {
    const seq = ++this.asked;
    try {
      const [list, queued] = await Promise.all([getJSON<WorkerList>("/workers"), getJSON<RunList>("/runs", { status: "QUEUED", limit: 100 })]);
      countAnswer(this.el);
      if (this.disposed || seq < this.shown) return;
      this.shown = seq;
      reconcile(this.waiting, queued.runs.reverse().map((run) => h("li", { "data-run": run.run_id }, this.runLink(run.run_id, run.name, `Queued since ${fmtTime(run.created_at)}`))));
      this.workers = list.workers;
      this.fetchedAt = Date.now();
      this.queue.textContent = `${list.queue_depth} job${list.queue_depth === 1 ? "" : "s"} waiting in the queue`;
      this.queue.dataset.depth = String(list.queue_depth);
      if (this.notice.classList.contains("stale")) this.setNotice("");
      this.render();
    } catch (e) {
      if (this.disposed || seq < this.shown) return;
      this.setNotice(`The workers could not be read (this page tries again every few seconds). ${e instanceof Error ? e.message : String(e)}`, true, "stale");
    }
  }

  private setNotice(message: string, error = false, kind = ""): void {
    this.notice.textContent = message;
    this.notice.className = `notice${error ? " error" : ""}${kind ? ` ${kind}` : ""}`;
  }

  private render(): void {
    const since = (Date.now() - this.fetchedAt) / 1000;
    const live = this.workers.filter((w) => w.stopped_at === null);
    const past = this.workers.filter((w) => w.stopped_at !== null);
    // redrawn every second: rows are patched, not rebuilt, or a click on a job's link or a
    // Stop button pressed across a redraw would reach no row (dom.ts, `morph`)
    reconcile(this.active, live.map((w) => this.row(w, since)), "worker");
    reconcile(this.past, past.map((w) => this.row(w, since)), "worker");
    this.empty.hidden = live.length > 0;
    this.pastSection.hidden = past.length === 0;
  }

  /** One worker's row, its heartbeat age and spend counted on `since` seconds after the answer. */
  private row(w: Worker, since: number): HTMLElement {
    const up = w.stopped_at === null;
    // a worker's spend grows while it is up, and while a lost or stopped one still holds
    // jobs (they hold its devices until reaped: analysis/workers.py); else it stopped, so
    // it never goes down between two answers
    const beats = w.status === "active" || w.status === "draining" || w.jobs.length > 0;
    const spend = w.spend === null || w.hourly_rate === null ? null : w.spend + (beats ? (since * w.devices * w.hourly_rate) / 3600 : 0);
    const [label, cls] = STATES[w.status] ?? [w.status, ""];
    const jobs = h("td", { class: "jobs" });
    for (const job of w.jobs) {
      const title = `${statusLabel(job.status)}, attempt ${job.attempt}, ${job.devices} device${job.devices === 1 ? "" : "s"}`;
      jobs.append(h("span", { class: `status ${statusClass(job.status)}` }, h("span", { class: "dot" })), this.runLink(job.run_id, job.name, title), " ");
      if (job.waits_for) jobs.append(h("span", { class: "muted", "data-waits": job.run_id }, `(${job.waits_for})`), " ");
    }
    if (!w.jobs.length) jobs.append(h("span", { class: "muted" }, "none"));
    const action = h("td", {});
    if (up) {
      const stop = h("button", { class: "btn danger", "data-drain": w.id, title: "Finish its running jobs, take no new ones, then exit." }, w.draining ? "Stopping…" : "Stop");
      stop.disabled = w.draining;
      stop.addEventListener("click", () => void this.drain(w, stop));
      action.append(stop);
    }
    return h(
      "tr",
      { "data-worker": w.id },
      h("td", { class: "mono" }, w.id),
      h("td", {}, w.host),
      h("td", {}, `${w.devices_used} / ${w.devices}`),
      h("td", {}, w.executor === "ray" ? `${w.device_profile} on Ray` : w.device_profile),
      h("td", {}, fmtSpend(w.hourly_rate)),
      jobs,
      h("td", { "data-spend": "" }, fmtSpend(spend)),
      h("td", {}, up ? `${fmtDuration(w.heartbeat_age_s + since)} ago` : "—"),
      h(
        "td",
        {},
        h("span", { class: `status ${cls}`, "data-state": w.status }, h("span", { class: "dot" }), label),
        // a live worker that claims nothing meanwhile (its Ray cluster does not answer)
        ...(w.unavailable ? [h("div", { class: "muted", "data-unavailable": w.id }, `Starts no job: ${w.unavailable}`)] : []),
      ),
      action,
    );
  }

  private runLink(runId: string, name: string, title: string): HTMLElement {
    const a = h("a", { href: `/runs?run=${encodeURIComponent(runId)}`, class: "job-link", title, "data-run": runId }, name);
    a.addEventListener("click", (e) => {
      e.preventDefault();
      this.onOpenRun(runId);
    });
    return a;
  }

  private async drain(w: Worker, button: HTMLButtonElement): Promise<void> {
    button.disabled = true;
    try {
      await postJSON<WorkerAnswer>(`/workers/${encodeURIComponent(w.id)}/drain`);
      this.setNotice(`Worker ${w.id} stops once its running jobs end; it takes no new ones.`);
    } catch (e) {
      button.disabled = false;
      this.setNotice(e instanceof Error ? e.message : String(e), true);
    }
    await this.refresh();
  }
}
