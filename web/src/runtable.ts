// The run table (/table?sort=<column>&desc=1&q=…): the project's runs a page at a time,
// sortable by any column, with their tags, group, latest training loss and reward;
// checkboxes feed the compare view, and "Export CSV" saves the table as shown.

import "./compare.css";
import { getJSON, runPath } from "./api";
import { findKey } from "./chartspecs";
import { h, morph, reconcile } from "./dom";
import { downloadCsv } from "./export";
import { fmtDuration, fmtNum, fmtTime, modelLabel, runStatusClass, statusText } from "./format";
import { restoreCursor, saveCursor } from "./keyboard";
import { compareLabel, runMatches, searchBox } from "./runlist";
import { groupButton, type Selection } from "./selection";
import type { MetricKeys, RunList, RunSummary } from "./types";

export interface TableState {
  sort: string;
  desc: boolean;
}

export function readTableState(p: URLSearchParams): TableState {
  const sort = p.get("sort") ?? "created";
  return { sort: COLUMNS.some((c) => c.id === sort) ? sort : "created", desc: p.has("sort") ? p.get("desc") === "1" : true };
}

export function writeTableState(s: TableState, p: URLSearchParams): void {
  p.set("sort", s.sort);
  if (s.desc) p.set("desc", "1");
}

/** A run as the table shows it: its summary and its latest loss and reward (read later). */
interface Row {
  run: RunSummary;
  loss: number | null;
  reward: number | null;
}

type Cell = string | number | null;

interface Column {
  id: string;
  label: string;
  /** The raw value, exported (and sorted by, unless `sortBy`). */
  value: (r: Row) => Cell;
  /** The text shown (the value when absent). */
  show?: (r: Row) => string;
  /** The value sorted by, where it is the text shown rather than the raw value. */
  sortBy?: (r: Row) => Cell;
}

const COLUMNS: Column[] = [
  { id: "name", label: "Name", value: (r) => r.run.name },
  { id: "status", label: "Status", value: (r) => r.run.status, show: (r) => statusText(r.run) },
  // shown and sorted as "from run <parent>", exported as the raw init_from: path
  { id: "model", label: "Model", value: (r) => r.run.base_model, show: (r) => modelLabel(r.run.base_model), sortBy: (r) => (r.run.base_model ? modelLabel(r.run.base_model) : null) },
  { id: "method", label: "Method", value: (r) => r.run.method },
  { id: "group", label: "Group", value: (r) => r.run.group },
  { id: "tags", label: "Tags", value: (r) => r.run.tags.join(" ") || null },
  { id: "duration", label: "Duration", value: (r) => r.run.duration_s, show: (r) => fmtDuration(r.run.duration_s) },
  { id: "created", label: "Created", value: (r) => r.run.created_at, show: (r) => fmtTime(r.run.created_at) },
  { id: "loss", label: "Latest loss", value: (r) => r.loss, show: (r) => fmtNum(r.loss), sortBy: (r) => finiteOrNull(r.loss) },
  { id: "reward", label: "Latest reward", value: (r) => r.reward, show: (r) => fmtNum(r.reward), sortBy: (r) => finiteOrNull(r.reward) },
];

/** A non-finite latest value sorts with the missing ones, last. */
function finiteOrNull(v: number | null): number | null {
  return v !== null && Number.isFinite(v) ? v : null;
}

const PAGE = 100;
// metric-key reads at once while the latest loss and reward fill in
const READERS = 4;

/** Nulls last whichever the direction; numbers as numbers, text by locale. */
function compare(a: Cell, b: Cell, desc: boolean): number {
  if (a === null || a === "") return b === null || b === "" ? 0 : 1;
  if (b === null || b === "") return -1;
  const d = typeof a === "number" && typeof b === "number" ? a - b : String(a).localeCompare(String(b));
  return desc ? -d : d;
}

export class RunTablePage {
  readonly el: HTMLElement;
  private rows: Row[] = [];
  // the latest loss and reward read per run, across reloads of the list
  private latest = new Map<string, { loss: number | null; reward: number | null }>();
  private body = h("tbody", { id: "run-table-body" });
  private head = h("tr", {});
  private count = h("span", { class: "muted", id: "run-table-count" });
  private more = h("button", { class: "btn", id: "run-table-more", hidden: "" }, `Load ${PAGE} more`);
  private compareButton = h("button", { class: "btn primary", id: "table-compare" });
  private search: HTMLInputElement;
  private cursor: string | null = null;
  private unsubscribe: () => void;
  private generation = 0;
  private disposed = false;
  // the latest loss and reward reads under way: an export waits for them
  private reading: Promise<void> = Promise.resolve();

  constructor(
    private state: TableState,
    private readonly project: string | null,
    q: string,
    private readonly selection: Selection,
    private readonly onState: (s: TableState) => void,
    private readonly onSearch: (q: string) => void,
    private readonly onOpenRun: (runId: string) => void,
    onCompare: (runIds: string[]) => void,
  ) {
    this.search = searchBox("table-search", q, (text) => {
      this.onSearch(text);
      void this.load();
    });
    this.more.addEventListener("click", () => void this.loadMore());
    this.compareButton.addEventListener("click", () => onCompare(this.selection.list));
    const csv = h("button", { class: "btn", id: "table-csv" }, "Export CSV");
    csv.addEventListener("click", () => void this.exportCsv());
    this.unsubscribe = selection.onChange(() => this.showSelection());
    this.el = h(
      "main",
      { class: "run-table-page", id: "run-table-page" },
      h("div", { class: "page-head" }, h("h2", {}, "Runs"), this.count, h("span", { class: "spacer" }), this.compareButton, csv),
      h("div", { class: "search-box table-search" }, this.search),
      h("div", { class: "table-wrap" }, h("table", { class: "table run-table", id: "run-table" }, h("thead", {}, this.head), this.body)),
      this.more,
    );
    this.showHead();
    this.showSelection();
  }

  get searchInput(): HTMLInputElement {
    return this.search;
  }

  get rowEls(): HTMLElement[] {
    return Array.from(this.body.children) as HTMLElement[];
  }

  async load(): Promise<void> {
    const gen = ++this.generation;
    const page = await getJSON<RunList>("/runs", { project: this.project, q: this.search.value.trim(), limit: PAGE });
    if (gen !== this.generation || this.disposed) return;
    this.rows = [];
    this.reading = Promise.resolve(); // an earlier list's reads no longer fill any row
    this.add(page);
  }

  private async loadMore(): Promise<void> {
    if (!this.cursor) return;
    const gen = this.generation;
    const page = await getJSON<RunList>("/runs", { project: this.project, q: this.search.value.trim(), limit: PAGE, cursor: this.cursor });
    if (gen === this.generation && !this.disposed) this.add(page);
  }

  private add(page: RunList): void {
    // a run listed before keeps the latest values read for it until they are read again:
    // a search cleared must not sort (or export) its rows by empty cells meanwhile
    const fresh = page.runs
      .filter((run) => !this.rows.some((r) => r.run.run_id === run.run_id))
      .map((run) => ({ run, loss: null, reward: null, ...this.latest.get(run.run_id) }));
    this.rows.push(...fresh);
    this.cursor = page.next_cursor;
    this.more.hidden = !this.cursor;
    this.showCount();
    this.showRows();
    const reading = this.readLatest(fresh, this.generation);
    this.reading = Promise.all([this.reading, reading]).then(
      () => undefined,
      () => undefined,
    );
  }

  /** Fill in the latest training loss and reward from each run's metric keys. */
  private async readLatest(rows: Row[], gen: number): Promise<void> {
    const queue = rows.slice();
    const reader = async () => {
      for (let row = queue.shift(); row; row = queue.shift()) {
        const { keys } = await getJSON<MetricKeys>(`${runPath(row.run.run_id)}/metrics/keys`);
        if (gen !== this.generation || this.disposed) return;
        const present = new Set(keys.filter((k) => k.count > 0).map((k) => k.key));
        // a key whose last point was non-finite has a null last value: NaN here, shown as
        // such, not as the "—" of a key never logged
        const last = (key: string | undefined) => {
          const k = keys.find((x) => x.key === key);
          return !k ? null : k.last_value ?? (k.count > 0 ? Number.NaN : null);
        };
        row.loss = last(findKey(present, "train_loss"));
        row.reward = last(findKey(present, "reward"));
        this.latest.set(row.run.run_id, { loss: row.loss, reward: row.reward });
      }
    };
    await Promise.all(Array.from({ length: READERS }, reader));
    if (gen === this.generation && !this.disposed) {
      this.showRows();
      this.body.dataset.latest = "true";
    }
  }

  private showCount(): void {
    this.count.textContent = `${this.rows.length} run${this.rows.length === 1 ? "" : "s"}${this.cursor ? "+" : ""}`;
  }

  private sorted(): Row[] {
    const col = COLUMNS.find((c) => c.id === this.state.sort) ?? COLUMNS[0];
    const key = col.sortBy ?? col.value;
    return this.rows.slice().sort((a, b) => compare(key(a), key(b), this.state.desc));
  }

  private showHead(): void {
    const all = h("input", { type: "checkbox", id: "run-table-all", "aria-label": "Select every run shown" });
    all.addEventListener("change", () => {
      if (all.checked) this.selection.add(this.rows.map((r) => r.run.run_id));
      else this.selection.set(this.selection.list.filter((id) => !this.rows.some((r) => r.run.run_id === id)));
    });
    this.head.replaceChildren(
      h("th", {}, all),
      ...COLUMNS.map((c) => {
        const sorted = c.id === this.state.sort;
        const button = h("button", { class: "sort", "data-sort": c.id }, c.label, sorted ? (this.state.desc ? " ▼" : " ▲") : "");
        // the whole cell sorts, not only its label: the button (for the keyboard) is inside it
        const th = h("th", { class: "sortable", "aria-sort": sorted ? (this.state.desc ? "descending" : "ascending") : "none" }, button);
        th.addEventListener("click", () => this.sortBy(c.id));
        return th;
      }),
    );
  }

  private sortBy(column: string): void {
    // a new column starts with what reads best first: text A to Z, numbers and times high to low
    const desc = column === this.state.sort ? !this.state.desc : !["name", "status", "model", "method", "group", "tags"].includes(column);
    this.state = { sort: column, desc };
    this.onState(this.state);
    this.showHead();
    this.showRows();
  }

  private showRows(): void {
    // rows already shown are patched and moved, not rebuilt: a click on a row as the
    // table changes (a run's update, the latest values read) still reaches it
    const cursor = saveCursor(this.body);
    reconcile(this.body, this.sorted().map((r) => this.rowEl(r)));
    restoreCursor(this.body, cursor);
    this.body.dataset.count = String(this.rows.length);
    this.showSelection();
  }

  private rowEl(r: Row): HTMLElement {
    const run = r.run;
    const box = h("input", { type: "checkbox", class: "run-check", "aria-label": `Select ${run.name} to compare` });
    box.addEventListener("change", () => this.selection.toggle(run.run_id, box.checked));
    const cells = COLUMNS.map((c) => {
      const text = c.show ? c.show(r) : String(c.value(r) ?? "—");
      if (c.id === "name") {
        // a long name wraps (compare.css); its tooltip holds it too
        const a = h("a", { class: "run-table-name", href: `/runs?run=${encodeURIComponent(run.run_id)}`, title: run.name }, run.name);
        a.addEventListener("click", (e) => {
          e.preventDefault();
          this.onOpenRun(run.run_id);
        });
        return h("td", { "data-col": c.id }, a);
      }
      if (c.id === "status") return h("td", { "data-col": c.id }, h("span", { class: `status ${runStatusClass(run)}` }, h("span", { class: "dot" }), text));
      // a long model name is cut short (compare.css), whole in its tooltip
      if (c.id === "model") return h("td", { "data-col": c.id }, h("span", { class: "run-table-model", ...(run.base_model ? { title: run.base_model } : {}) }, text));
      if (c.id === "tags") return h("td", { "data-col": c.id }, ...run.tags.map((t) => h("span", { class: "tag", title: t }, t)));
      if (c.id === "group" && run.group) return h("td", { "data-col": c.id }, groupButton(run.group, () => this.project, this.selection));
      return h("td", { "data-col": c.id }, text);
    });
    return h("tr", { "data-run": run.run_id, tabindex: "0" }, h("td", {}, box), ...cells);
  }

  private showSelection(): void {
    for (const tr of this.rowEls) {
      const box = tr.querySelector<HTMLInputElement>(".run-check");
      if (box) box.checked = this.selection.has(tr.dataset.run ?? "");
    }
    const all = this.head.querySelector<HTMLInputElement>("#run-table-all");
    if (all) all.checked = this.rows.length > 0 && this.rows.every((r) => this.selection.has(r.run.run_id));
    compareLabel(this.compareButton, this.selection.size);
  }

  /** A listed run changed (the run-list stream): its row shows it. */
  upsert(run: RunSummary): void {
    const row = this.rows.find((r) => r.run.run_id === run.run_id);
    if (!row) {
      // a run started while the table is open joins it, where the sort puts it
      if (this.project && run.project !== this.project) return;
      const q = this.search.value.trim();
      if (q && !runMatches(run, q)) return;
      // one older than every listed run while more pages remain belongs to a later page
      if (this.cursor && this.rows.every((r) => (r.run.created_at ?? "") > (run.created_at ?? ""))) return;
      const fresh = { run, loss: null, reward: null, ...this.latest.get(run.run_id) };
      this.rows.push(fresh);
      this.showCount();
      this.showRows();
      void this.readLatest([fresh], this.generation);
      return;
    }
    row.run = run;
    const el = this.rowEls.find((tr) => tr.dataset.run === run.run_id);
    const cursor = saveCursor(this.body);
    if (el) morph(el, this.rowEl(row));
    restoreCursor(this.body, cursor);
    this.showSelection();
  }

  private async exportCsv(): Promise<void> {
    // rows whose latest loss and reward are still being read (a search just cleared, a
    // page just loaded) go in the file with them, not with empty cells in a wrong order
    await this.reading;
    if (this.disposed) return;
    const rows = this.sorted().map((r) => [r.run.run_id, ...COLUMNS.map((c) => c.value(r))]);
    downloadCsv("runs.csv", ["run_id", ...COLUMNS.map((c) => c.id)], rows);
  }

  dispose(): void {
    this.disposed = true;
    this.unsubscribe();
  }
}
