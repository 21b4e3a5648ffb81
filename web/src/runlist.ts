// The left-hand job list: search, status dots, live durations, batches of 100.

import { getJSON } from "./api";
import { clear, h } from "./dom";
import { fmtDuration, liveDuration, statusClass, statusText } from "./format";
import type { RunList, RunSummary } from "./types";

export class RunListView {
  readonly el: HTMLElement;
  private rows = new Map<string, { run: RunSummary; el: HTMLElement; at: number }>();
  private list = h("ul", { class: "run-list", id: "run-list" });
  private more = h("button", { class: "btn more", id: "load-more", hidden: "" }, "Load 100 more");
  private search = h("input", { type: "search", id: "search", placeholder: "Search name, id, status, model, dataset, trainer, backend", "aria-label": "Search runs" });
  private status = h("p", { class: "muted list-status" });
  private cursor: string | null = null;
  private searchTimer: number | undefined;
  private ticker: number;
  private generation = 0;
  selected: string | null = null;

  constructor(
    private project: string | null,
    q: string,
    private readonly onSelect: (run: RunSummary) => void,
    private readonly onSearch: (q: string) => void,
  ) {
    this.search.value = q;
    this.search.addEventListener("input", () => {
      window.clearTimeout(this.searchTimer);
      this.searchTimer = window.setTimeout(() => {
        this.onSearch(this.search.value);
        void this.reload();
      }, 200);
    });
    this.more.addEventListener("click", () => void this.loadMore());
    this.el = h("aside", { class: "sidebar" }, h("div", { class: "search-box" }, this.search), this.status, this.list, this.more);
    this.ticker = window.setInterval(() => this.tick(), 1000);
  }

  get query(): string {
    return this.search.value.trim();
  }

  setProject(project: string | null): void {
    this.project = project;
    void this.reload();
  }

  async reload(): Promise<void> {
    const gen = ++this.generation;
    const page = await getJSON<RunList>("/runs", { project: this.project, q: this.query, limit: 100 });
    if (gen !== this.generation) return;
    clear(this.list);
    this.rows.clear();
    this.add(page);
  }

  private async loadMore(): Promise<void> {
    if (!this.cursor) return;
    const gen = this.generation;
    const page = await getJSON<RunList>("/runs", { project: this.project, q: this.query, limit: 100, cursor: this.cursor });
    if (gen === this.generation) this.add(page);
  }

  private add(page: RunList): void {
    for (const run of page.runs) {
      if (this.rows.has(run.run_id)) continue;
      const el = this.rowEl(run);
      this.list.appendChild(el);
      this.rows.set(run.run_id, { run, el, at: Date.now() });
    }
    this.cursor = page.next_cursor;
    this.more.hidden = !this.cursor;
    this.status.textContent = this.rows.size ? `${this.rows.size} run${this.rows.size === 1 ? "" : "s"}${this.cursor ? "+" : ""}` : "No runs match.";
    this.list.dataset.count = String(this.rows.size);
    this.highlight();
  }

  /** A run changed or appeared (from the live list stream). */
  upsert(run: RunSummary): void {
    if (this.project && run.project !== this.project) return;
    const existing = this.rows.get(run.run_id);
    if (existing) {
      const el = this.rowEl(run);
      existing.el.replaceWith(el);
      this.rows.set(run.run_id, { run, el, at: Date.now() });
    } else if (!this.query || this.matches(run, this.query)) {
      const before = this.placeFor(run);
      if (before !== undefined) {
        const el = this.rowEl(run);
        this.list.insertBefore(el, before);
        this.rows.set(run.run_id, { run, el, at: Date.now() });
        this.list.dataset.count = String(this.rows.size);
        this.status.textContent = `${this.rows.size} run${this.rows.size === 1 ? "" : "s"}${this.cursor ? "+" : ""}`;
      }
    }
    this.highlight();
  }

  /**
   * Where a run not yet listed goes, newest first: before the first listed run created
   * before it (null: at the end). Runs are indexed in no particular order, so a run may
   * arrive after newer ones. One older than every listed run while more pages remain
   * belongs to a later page (undefined: not shown now).
   */
  private placeFor(run: RunSummary): Element | null | undefined {
    const created = Date.parse(run.created_at ?? "");
    for (const el of Array.from(this.list.children)) {
      const listed = this.rows.get((el as HTMLElement).dataset.run ?? "");
      if (listed && Date.parse(listed.run.created_at ?? "") < created) return el;
    }
    return this.cursor ? undefined : null;
  }

  get(runId: string): RunSummary | undefined {
    return this.rows.get(runId)?.run;
  }

  select(runId: string | null): void {
    this.selected = runId;
    this.highlight();
  }

  private matches(run: RunSummary, q: string): boolean {
    const hay = [run.name, run.run_id, run.status, run.base_model, run.dataset, run.trainer, run.backend].join(" ").toLowerCase();
    return hay.includes(q.toLowerCase());
  }

  private highlight(): void {
    for (const [id, { el }] of this.rows) el.classList.toggle("selected", id === this.selected);
  }

  private rowEl(run: RunSummary): HTMLElement {
    const dur = h("span", { class: "duration" }, fmtDuration(run.duration_s));
    const li = h(
      "li",
      { class: "run-row", "data-run": run.run_id, tabindex: "0", role: "button" },
      h("div", { class: "run-name" }, run.name || `${run.backend ?? "?"}/${run.trainer ?? "?"}`),
      h("div", { class: "run-model muted" }, run.base_model ?? "—"),
      h(
        "div",
        { class: "run-meta" },
        h("span", { class: `status ${statusClass(run.status)}` }, h("span", { class: "dot" }), statusText(run)),
        dur,
      ),
    );
    li.addEventListener("click", () => this.onSelect(run));
    li.addEventListener("keydown", (e) => {
      if (e.key === "Enter") this.onSelect(run);
    });
    return li;
  }

  private tick(): void {
    for (const { run, el, at } of this.rows.values()) {
      if (run.ended_at || run.process_gone || run.duration_s === null) continue;
      const d = el.querySelector(".duration");
      if (d) d.textContent = fmtDuration(liveDuration(run, at));
    }
  }

  dispose(): void {
    window.clearInterval(this.ticker);
  }
}
