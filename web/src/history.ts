// The history table: every step of the run, a page at a time. A step typed in the pager
// (or a click on a chart's point, through `goTo`) opens the page that starts at it, its
// row marked, so a long run's step is one action away, not thousands of pages. While the
// run logs, the page in view is read again (at most once a second): a page with no later
// one (the first, until it is full, or the latest page) shows the new steps, and any page
// its count of steps and a pager that reaches them. An answer to an older read than the
// last one asked (a live read overtaken by a click on the pager) is dropped. A run whose
// rollouts carry reward terms has a column per split and term after the metrics, the mean
// over the step's rollouts (`term/NAME`, `SPLIT/term/NAME` for another split than train,
// as `runwatch runs metrics` names them), for the terms the page's steps report.

import { getJSON, runPath } from "./api";
import { HISTORY_COLUMNS, resolveLines } from "./chartspecs";
import { clear, FailureLine, h } from "./dom";
import { fmtNum } from "./format";
import type { HistoryPage, MetricKey, PointsEvent } from "./types";

const PAGE = 50;
const LIVE_MS = 1000;

type Where = { after?: string | null; before?: string | null; order?: string };

export class HistoryTable {
  readonly el: HTMLElement;
  private body = h("tbody");
  private head = h("thead");
  private info = h("span", { class: "muted", id: "history-range" });
  private stepInput = h("input", { type: "number", id: "history-step", min: "0", step: "1", placeholder: "step", "aria-label": "Go to step", title: "Go to step" });
  private goForm = h("form", { class: "history-go" }, this.stepInput, h("button", { class: "btn", type: "submit" }, "Go"));
  private failure = new FailureLine("history-error", "The history could not be read.");
  private prev = h("button", { class: "btn", disabled: "" }, "‹ Earlier");
  private next = h("button", { class: "btn", disabled: "" }, "Later ›");
  private first = h("button", { class: "btn" }, "First");
  private last = h("button", { class: "btn" }, "Latest");
  private columns: { label: string; key: string }[] = [];
  // [split, term] of the reward-term columns the page in view shows
  private terms: [string, string][] = [];
  private known = new Set<string>();
  private page: HistoryPage | null = null;
  private where: Where = {};
  private timer: number | undefined;
  private reads = 0;
  // the step gone to (typed, or a chart point clicked): its row is marked
  private marked: number | null = null;
  // the page read for a step gone to is brought into view once it is shown (a chart point
  // clicked far above the History would otherwise change a table out of sight)
  private reveal = false;

  constructor(private readonly runId: string) {
    this.el = h(
      "section",
      { class: "card history", id: "history" },
      h("div", { class: "card-head" }, h("h3", {}, "History"), h("div", { class: "pager" }, this.first, this.prev, this.info, this.next, this.last, this.goForm)),
      this.failure.el,
      h("div", { class: "table-wrap" }, h("table", { class: "table" }, this.head, this.body)),
    );
    this.prev.addEventListener("click", () => void this.load({ before: this.page?.prev_cursor ?? null }));
    this.next.addEventListener("click", () => void this.load({ after: this.page?.next_cursor ?? null }));
    this.first.addEventListener("click", () => void this.load({}));
    this.last.addEventListener("click", () => void this.load({ order: "latest" }));
    this.goForm.addEventListener("submit", (e) => {
      e.preventDefault();
      const step = Number(this.stepInput.value);
      if (this.stepInput.value.trim() !== "" && Number.isInteger(step) && step >= 0) this.goTo(step);
    });
  }

  /** Open the page that starts at `step` (the first step logged from it on; past the last
   * step, the latest page), its row marked. */
  goTo(step: number): void {
    this.marked = step;
    this.reveal = true;
    this.stepInput.value = String(step);
    void this.load(step > 0 ? { after: String(step - 1) } : {});
  }

  async init(keys: MetricKey[]): Promise<void> {
    this.known = new Set(keys.map((k) => k.key));
    this.pickColumns();
    await this.load({});
  }

  /** New points were logged: read the page again if it can show them (new keys may add columns). */
  onPoints(batch: PointsEvent[]): void {
    const before = this.known.size;
    for (const ev of batch) for (const key of Object.keys(ev.values)) this.known.add(key);
    if (this.known.size !== before) this.pickColumns();
    if (this.timer !== undefined) return;
    this.timer = window.setTimeout(() => {
      this.timer = undefined;
      void this.load(this.where);
    }, LIVE_MS);
  }

  dispose(): void {
    window.clearTimeout(this.timer);
  }

  private pickColumns(): void {
    const picked = new Set<string>();
    this.columns = [];
    for (const spec of HISTORY_COLUMNS) {
      const [line] = resolveLines({ id: spec.label, title: spec.label, group: "", lines: [spec] }, this.known);
      if (line && !picked.has(line.key)) {
        picked.add(line.key);
        this.columns.push({ label: spec.label, key: line.key });
      }
    }
    if (!this.columns.length) {
      for (const k of [...this.known].slice(0, 6)) this.columns.push({ label: k, key: k });
    }
    this.showHead();
  }

  private showHead(): void {
    clear(this.head);
    const terms = this.terms.map(([split, term]) => h("th", { class: "term", title: `mean of reward term ${term} over the step's ${split} rollouts` }, termLabel(split, term)));
    this.head.appendChild(h("tr", {}, h("th", {}, "step"), ...this.columns.map((c) => h("th", { title: c.key }, c.label)), ...terms));
  }

  private async load(where: Where): Promise<void> {
    this.where = where;
    const q = new URLSearchParams({ limit: String(PAGE), reward_terms: "true" });
    for (const c of this.columns) q.append("key", c.key);
    if (where.after) q.set("after", where.after);
    if (where.before) q.set("before", where.before);
    if (where.order) q.set("order", where.order);
    const read = ++this.reads;
    let page: HistoryPage;
    try {
      page = await getJSON<HistoryPage>(`${runPath(this.runId)}/history?${q.toString()}`);
    } catch (e) {
      // the page shown stays; the next new points or a click on the pager read it again
      if (read === this.reads) {
        this.failure.show(e);
        this.reveal = false;
      }
      return;
    }
    if (read !== this.reads) return;
    // a step past the last one logged: the latest page holds the steps nearest it
    if (where.after && !page.rows.length && page.total > 0) {
      void this.load({ order: "latest" });
      return;
    }
    this.failure.clear();
    this.page = page;
    const terms = pageTerms(page);
    if (terms.join("\n") !== this.terms.join("\n")) {
      this.terms = terms;
      this.showHead();
    }
    clear(this.body);
    for (const row of this.page.rows) {
      const byTerm = this.terms.map(([split, term]) => termCell(row.reward_terms?.[split]?.[term]));
      this.body.appendChild(h("tr", row.step === this.marked ? { class: "at-step" } : {}, h("td", {}, String(row.step)), ...this.columns.map((c) => cell(row.values, c.key)), ...byTerm));
    }
    if (!this.page.rows.length) this.body.appendChild(h("tr", {}, h("td", { colspan: String(this.columns.length + this.terms.length + 1), class: "muted" }, "No steps yet.")));
    if (this.reveal) {
      this.reveal = false;
      (this.body.querySelector("tr.at-step") ?? this.el).scrollIntoView({ block: "nearest" });
    }
    const rows = this.page.rows;
    this.info.textContent = rows.length ? `steps ${rows[0].step}–${rows[rows.length - 1].step} of ${this.page.total}` : "";
    this.prev.disabled = !this.page.prev_cursor;
    this.next.disabled = !this.page.next_cursor;
    this.el.dataset.total = String(this.page.total);
  }
}

/** [split, term] of every reward term the page's steps report: train's first, then by
 * split and name. */
function pageTerms(page: HistoryPage): [string, string][] {
  const seen = new Map<string, [string, string]>();
  for (const row of page.rows) {
    for (const [split, means] of Object.entries(row.reward_terms ?? {})) {
      for (const term of Object.keys(means)) seen.set(`${split}\u0000${term}`, [split, term]);
    }
  }
  return [...seen.values()].sort(([sa, ta], [sb, tb]) => Number(sa !== "train") - Number(sb !== "train") || (sa < sb ? -1 : sa > sb ? 1 : ta < tb ? -1 : ta > tb ? 1 : 0));
}

function termLabel(split: string, term: string): string {
  return `${split === "train" ? "" : `${split}/`}term/${term}`;
}

/** A reward term's mean at a step: "—" where the step's rollouts report none. */
function termCell(v: number | undefined): HTMLElement {
  return v === undefined ? h("td", {}, "—") : h("td", {}, fmtNum(v));
}

/** A value of the table: a key the step logged no point of is "—" (the API leaves it out
 * of the row), a non-finite value (NaN, ±Infinity: null in the JSON) "non-finite". */
function cell(values: Record<string, number | null>, key: string): HTMLElement {
  if (!(key in values)) return h("td", {}, "—");
  const v = values[key];
  return v === null ? h("td", { class: "non-finite" }, "non-finite") : h("td", {}, fmtNum(v));
}
