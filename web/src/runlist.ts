// The left-hand job list: search, status dots, live durations, batches of 100, and
// checkboxes (one run, or every run of its group) that feed the compare view.

import { getJSON } from "./api";
import { h, morph, reconcile } from "./dom";
import { fmtDuration, liveDuration, modelLabel, runStatusClass, statusText } from "./format";
import { restoreCursor, saveCursor } from "./keyboard";
import { groupButton, type Selection } from "./selection";
import type { RunList, RunSummary, ServerInfo } from "./types";

/** Seconds between two reads of the server's notes on its runs folder. */
const NOTES_EVERY = 2;

/** A run search box that calls `onSearch` once typing pauses for 200 ms. */
export function searchBox(id: string, q: string, onSearch: (q: string) => void): HTMLInputElement {
  const input = h("input", { type: "search", id, placeholder: "Search name, id, status, model, dataset, trainer, backend", "aria-label": "Search runs" });
  input.value = q;
  let timer: number | undefined;
  input.addEventListener("input", () => {
    window.clearTimeout(timer);
    timer = window.setTimeout(() => onSearch(input.value), 200);
  });
  return input;
}

/** "Compare (n)": enabled from two runs on. */
export function compareLabel(button: HTMLButtonElement, n: number): void {
  button.textContent = `Compare (${n})`;
  button.disabled = n < 2;
}

/** Whether a run that arrives live belongs under search text `q` (the fields the server's
 *  search reads). */
export function runMatches(run: RunSummary, q: string): boolean {
  const hay = [run.name, run.run_id, run.status, run.base_model, run.dataset, run.trainer, run.backend].join(" ").toLowerCase();
  return hay.includes(q.toLowerCase());
}

export class RunListView {
  readonly el: HTMLElement;
  private rows = new Map<string, { run: RunSummary; el: HTMLElement; at: number }>();
  private list = h("ul", { class: "run-list", id: "run-list" });
  private more = h("button", { class: "btn more", id: "load-more", hidden: "" }, "Load 100 more");
  private search: HTMLInputElement;
  private status = h("p", { class: "muted list-status" });
  /** What the server's indexer says of its runs folder as a whole (runs kept though their
   *  folders are gone, a folder it cannot list): read from /api/server every NOTES_EVERY s. */
  private notes = h("div", { class: "folder-notes", id: "folder-notes", role: "status" });
  private ticks = 0;
  /** Whether the list is in use (reloaded once): a share page's list is not, and a share
   *  may read nothing of the server but its run. */
  private listed = false;
  private compare = h("button", { class: "btn primary", id: "compare-button" });
  private clearButton = h("button", { class: "btn", id: "clear-selection" }, "Clear");
  private unsubscribe: () => void;
  private cursor: string | null = null;
  private ticker: number;
  private generation = 0;
  selected: string | null = null;

  constructor(
    private project: string | null,
    q: string,
    private readonly onSelect: (run: RunSummary) => void,
    private readonly onSearch: (q: string) => void,
    private readonly selection: Selection,
    onCompare: (runIds: string[]) => void,
    /** Told whether the list, unfiltered by a search, holds no run at all (a new folder). */
    private readonly onNoRuns: (none: boolean) => void = () => undefined,
  ) {
    this.search = searchBox("search", q, (text) => {
      this.onSearch(text);
      void this.reload();
    });
    this.more.addEventListener("click", () => void this.loadMore());
    this.compare.addEventListener("click", () => onCompare(this.selection.list));
    this.clearButton.addEventListener("click", () => this.selection.set([]));
    this.unsubscribe = selection.onChange(() => this.showSelection());
    const bar = h("div", { class: "compare-bar" }, this.compare, this.clearButton);
    this.el = h("aside", { class: "sidebar" }, h("div", { class: "search-box" }, this.search, bar), this.notes, this.status, this.list, this.more);
    this.showSelection();
    this.ticker = window.setInterval(() => this.tick(), 1000);
  }

  private async readNotes(): Promise<void> {
    try {
      const info = await getJSON<ServerInfo>("/server");
      const notes = info.notes;
      // rebuilt only when they change: a reader selecting a note's text keeps it
      if (notes.join("\n") !== Array.from(this.notes.children, (p) => p.textContent).join("\n")) {
        this.notes.replaceChildren(...notes.map((note) => h("p", {}, note)));
      }
    } catch {
      // the list's own status says when the server does not answer; the notes shown stay
    }
  }

  get searchInput(): HTMLInputElement {
    return this.search;
  }

  /** The rows in the order shown (keyboard navigation walks them). */
  get rowEls(): HTMLElement[] {
    return Array.from(this.list.children) as HTMLElement[];
  }

  get query(): string {
    return this.search.value.trim();
  }

  /** Search for `q` (typed elsewhere: the run table's box), as if typed here. */
  setQuery(q: string): void {
    if (q === this.search.value) return;
    this.search.value = q;
    void this.reload();
  }

  setProject(project: string | null): void {
    this.project = project;
    void this.reload();
  }

  async reload(): Promise<void> {
    if (!this.listed) {
      this.listed = true;
      void this.readNotes();
    }
    const gen = ++this.generation;
    let page: RunList;
    try {
      page = await getJSON<RunList>("/runs", { project: this.project, q: this.query, limit: 100 });
    } catch (e) {
      // the rows shown stay; the stream's `ready` lists them again once the server answers
      if (gen === this.generation) this.status.textContent = `The runs could not be listed. ${e instanceof Error ? e.message : String(e)}`;
      return;
    }
    if (gen !== this.generation) return;
    // the rows already shown are patched, not rebuilt: a click on one as the list
    // reloads (the stream's `ready`, a search) still opens its run
    const cursor = saveCursor(this.list);
    this.rows.clear();
    this.add(page, true);
    restoreCursor(this.list, cursor);
  }

  private async loadMore(): Promise<void> {
    if (!this.cursor) return;
    const gen = this.generation;
    try {
      const page = await getJSON<RunList>("/runs", { project: this.project, q: this.query, limit: 100, cursor: this.cursor });
      if (gen === this.generation) this.add(page);
    } catch (e) {
      if (gen === this.generation) this.status.textContent = `More runs could not be listed. ${e instanceof Error ? e.message : String(e)}`;
    }
  }

  /** Show a page of runs after those listed, or in their place (`replace`). */
  private add(page: RunList, replace = false): void {
    const runs = new Map<string, RunSummary>();
    for (const run of page.runs) if (!this.rows.has(run.run_id) && !runs.has(run.run_id)) runs.set(run.run_id, run);
    const els = Array.from(runs.values(), (run) => this.rowEl(run));
    if (replace) reconcile(this.list, els).forEach((el, i) => (els[i] = el));
    else this.list.append(...els);
    Array.from(runs.values()).forEach((run, i) => this.rows.set(run.run_id, { run, el: els[i], at: Date.now() }));
    this.cursor = page.next_cursor;
    this.more.hidden = !this.cursor;
    this.showCount();
    this.highlight();
  }

  /** The count of runs listed; with none, whether a search hides them or there are none yet. */
  private showCount(): void {
    const n = this.rows.size;
    const none = n === 0 && !this.query;
    this.status.textContent = n ? `${n} run${n === 1 ? "" : "s"}${this.cursor ? "+" : ""}` : none ? (this.project ? `No runs in ${this.project} yet.` : "No runs yet.") : "No runs match.";
    this.list.dataset.count = String(n);
    this.onNoRuns(none);
  }

  /** A run changed or appeared (from the live list stream). */
  upsert(run: RunSummary): void {
    if (this.project && run.project !== this.project) return;
    const existing = this.rows.get(run.run_id);
    if (existing) {
      // patched in place: a row replaced under a press loses the click that releases on it
      const cursor = saveCursor(this.list);
      const el = morph(existing.el, this.rowEl(run)) as HTMLElement;
      restoreCursor(this.list, cursor);
      this.rows.set(run.run_id, { run, el, at: Date.now() });
    } else if (!this.query || runMatches(run, this.query)) {
      const before = this.placeFor(run);
      if (before !== undefined) {
        const el = this.rowEl(run);
        this.list.insertBefore(el, before);
        this.rows.set(run.run_id, { run, el, at: Date.now() });
        this.showCount();
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

  private highlight(): void {
    for (const [id, { el }] of this.rows) el.classList.toggle("selected", id === this.selected);
  }

  private showSelection(): void {
    for (const [id, { el }] of this.rows) {
      const box = el.querySelector<HTMLInputElement>(".run-check");
      if (box) box.checked = this.selection.has(id);
    }
    compareLabel(this.compare, this.selection.size);
    this.clearButton.hidden = this.selection.size === 0;
  }

  private rowEl(run: RunSummary): HTMLElement {
    const dur = h("span", { class: "duration" }, fmtDuration(run.duration_s));
    const name = run.name || `${run.backend ?? "?"}/${run.trainer ?? "?"}`;
    const box = h("input", { type: "checkbox", class: "run-check", "aria-label": `Select ${name} to compare` });
    box.checked = this.selection.has(run.run_id);
    box.addEventListener("click", (e) => e.stopPropagation());
    box.addEventListener("change", () => this.selection.toggle(run.run_id, box.checked));
    const groupEl = run.group ? groupButton(run.group, () => this.project, this.selection) : null;
    // the row is a list item that a click anywhere opens, not a button: a button may hold
    // no other control, and the row holds a checkbox and a group button; its name is the
    // button that opens the run for a screen reader and the Tab key
    const open = h("button", { type: "button", class: "run-open", title: name, "aria-label": `Open ${name}` }, name);
    const li = h(
      "li",
      { class: "run-row", "data-run": run.run_id, tabindex: "-1" },
      h("div", { class: "run-name" }, box, open),
      h("div", { class: "run-model muted" }, h("span", { class: "model", title: run.base_model ?? "" }, modelLabel(run.base_model)), groupEl),
      h(
        "div",
        { class: "run-meta" },
        h("span", { class: `status ${runStatusClass(run)}` }, h("span", { class: "dot" }), statusText(run)),
        dur,
      ),
    );
    // a row is patched as its run changes, keeping its first listeners: they read the run now
    const current = () => this.rows.get(run.run_id)?.run ?? run;
    li.addEventListener("click", () => this.onSelect(current()));
    li.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && e.target === li) this.onSelect(current());
    });
    return li;
  }

  private tick(): void {
    if (this.listed && ++this.ticks % NOTES_EVERY === 0) void this.readNotes();
    for (const { run, el, at } of this.rows.values()) {
      if (run.ended_at || run.process_gone || run.duration_s === null) continue;
      const d = el.querySelector(".duration");
      if (d) d.textContent = fmtDuration(liveDuration(run, at));
    }
  }

  dispose(): void {
    window.clearInterval(this.ticker);
    this.unsubscribe();
  }
}
