// The app (its own chunk, imported by main.ts): the shell, URL state (/runs?project=…&run=…, /compare?run=…&run=…,
// /table, /new, /resources, /tokens), routing and the keys of the run list.

import { ApiError, getJSON } from "./api";
import { CompareView, readCompareState, writeCompareState, type CompareState } from "./compare";
import { DetailView } from "./detail";
import { h, MARKS } from "./dom";
import { installListKeys, type KeyTarget } from "./keyboard";
import { LiveStream } from "./live";
import { NewJobPage } from "./newjob";
import { firstRunGuide } from "./recording";
import { ResourcesPage } from "./resources";
import { RunListView } from "./runlist";
import { RunTablePage, readTableState, writeTableState, type TableState } from "./runtable";
import { Selection } from "./selection";
import { TokensPage } from "./tokens";
import type { RunSummary } from "./types";

type Page = "runs" | "new" | "resources" | "compare" | "table" | "tokens";

const PAGE_PATHS: Record<Page, string> = { runs: "/runs", new: "/new", resources: "/resources", compare: "/compare", table: "/table", tokens: "/tokens" };

interface UrlState {
  page: Page;
  project: string | null;
  run: string | null;
  q: string;
  tab: string;
  compare: CompareState;
  table: TableState;
  // opened from a share link: this one run, read-only, and nothing of the other runs
  shared: boolean;
}

function readUrl(): UrlState {
  const u = new URL(window.location.href);
  const p = u.searchParams;
  const page = (Object.keys(PAGE_PATHS) as Page[]).find((k) => u.pathname.startsWith(PAGE_PATHS[k])) ?? "runs";
  return {
    page,
    project: p.get("project"),
    run: page === "runs" ? p.get("run") : null,
    q: p.get("q") ?? "",
    tab: p.get("tab") ?? "overview",
    compare: readCompareState(page === "compare" ? p : new URLSearchParams()),
    table: readTableState(page === "table" ? p : new URLSearchParams()),
    shared: p.get("shared") === "1",
  };
}

function writeUrl(s: UrlState, push: boolean): void {
  const p = new URLSearchParams();
  if (s.project) p.set("project", s.project);
  if (s.page === "runs" && s.run) p.set("run", s.run);
  if (s.q && (s.page === "runs" || s.page === "compare" || s.page === "table")) p.set("q", s.q);
  if (s.page === "runs" && s.tab && s.tab !== "overview") p.set("tab", s.tab);
  if (s.page === "compare") writeCompareState(s.compare, p);
  if (s.page === "table") writeTableState(s.table, p);
  if (s.shared) p.set("shared", "1");
  const qs = p.toString();
  const url = `${PAGE_PATHS[s.page]}${qs ? `?${qs}` : ""}`;
  if (url === `${window.location.pathname}${window.location.search}`) return;
  if (push) history.pushState(null, "", url);
  else history.replaceState(null, "", url);
}

// the longest the run list waits for the opened page's charts to be painted
const SHELL_WAIT_MS = 2000;

/** Resolves once the page's charts are painted (its `mark`: MARKS.drawn, or on the compare
 * page MARKS.all, every chart, those below the window too), or after `ms`. */
function chartsPainted(mark: string, ms: number): Promise<void> {
  return new Promise((resolve) => {
    let observer: PerformanceObserver | null = null;
    const done = (): void => {
      observer?.disconnect();
      window.clearTimeout(timer);
      resolve();
    };
    const timer = window.setTimeout(done, ms);
    if (performance.getEntriesByName(mark, "mark").length) return done();
    try {
      observer = new PerformanceObserver((entries) => {
        if (entries.getEntriesByName(mark).length) done();
      });
      observer.observe({ type: "mark" });
    } catch {
      // no observer of marks in this browser: the timer alone
    }
  });
}

class App {
  private state = readUrl();
  private root = document.getElementById("app") as HTMLElement;
  private projectSelect = h("select", { id: "project", "aria-label": "Project" }, h("option", { value: "" }, "All projects"));
  private body = h("div", { class: "layout" });
  private selection = new Selection();
  private list: RunListView;
  private detail: DetailView | null = null;
  private compare: CompareView | null = null;
  private table: RunTablePage | null = null;
  // the New job or Resources page while one is open
  private page: { el: HTMLElement; dispose?: () => void } | null = null;
  // the list lies left of the pane, or above it on a phone: the hint names neither side
  private pick = h("p", { class: "muted", id: "pick-a-run" }, "Select a run in the list.");
  private guide = firstRunGuide();
  // the pane without a run: "select one", or how to record the first while there is none
  private placeholder = h("main", { class: "detail empty-detail" }, this.pick);

  constructor() {
    const newJob = h("button", { class: "btn primary", id: "new-job-button" }, "+ New job");
    newJob.addEventListener("click", () => this.go({ page: "new", run: null }));
    this.projectSelect.addEventListener("change", () => {
      this.go({ project: this.projectSelect.value || null, run: null });
      this.list.setProject(this.state.project);
      if (this.state.page === "table") this.render();
    });
    const link = (label: string, page: Page, attrs: Record<string, string>) => {
      const a = h("a", { href: PAGE_PATHS[page], ...attrs }, label);
      a.addEventListener("click", (e) => {
        e.preventDefault();
        this.go({ page, run: null });
      });
      return a;
    };
    if (this.state.shared) {
      this.list = this.sharedShell();
      return;
    }
    const brand = link("runwatch", "runs", { class: "brand" });
    const table = link("Table", "table", { class: "nav-link", id: "table-link" });
    const resources = link("Resources", "resources", { class: "nav-link", id: "resources-link" });
    const tokens = link("Tokens", "tokens", { class: "nav-link", id: "tokens-link" });
    this.root.append(h("header", { class: "topbar" }, brand, h("span", { class: "muted" }, "Training jobs"), this.projectSelect, table, resources, tokens, h("span", { class: "spacer" }), newJob), this.body);
    this.list = new RunListView(
      this.state.project,
      this.state.q,
      (run) => this.openRun(run.run_id),
      (q) => this.go({ q }, false),
      this.selection,
      (runs) => this.openCompare(runs),
      (none) => this.placeholder.replaceChildren(none ? this.guide : this.pick),
    );
    window.addEventListener("popstate", () => {
      this.state = readUrl();
      this.render();
    });
    // the page opened (a run, a comparison) asks for its data first, and the list, the
    // projects and the list's stream wait until its charts are painted: asked beside it,
    // they took the one server's time from its answer (SHELL_WAIT_MS at most, for a page
    // that draws no chart)
    installListKeys(() => this.keyTarget());
    this.render();
    const compare = this.state.page === "compare" && this.state.compare.runs.length > 0;
    const opened = (this.state.page === "runs" && this.state.run !== null) || compare;
    // the compare view draws the charts below the window after those in it: the list's
    // requests and rows waited for those alone and were made between
    if (opened) void chartsPainted(compare ? MARKS.all : MARKS.drawn, SHELL_WAIT_MS).then(() => this.startShell());
    else this.startShell();
  }

  /** The run list, the projects and the list's live stream. */
  private startShell(): void {
    // the stream says `ready` once it watches; listing again then closes the gap between
    // the first list and the stream's start
    new LiveStream("/api/stream/runs", {
      run: (d) => {
        const run = d as RunSummary;
        this.list.upsert(run);
        this.compare?.update(run);
        this.table?.upsert(run);
        // a cancel request changes the index alone: the run's own stream has no event for it
        if (run.run_id === this.state.run) this.detail?.update(run, false);
      },
      ready: () => void this.list.reload(),
    });
    void this.loadProjects();
    void this.list.reload();
  }

  /** The page of a share link: its run alone. A share reads nothing else (the list, the
   * projects and their stream would be refused), so none of them is asked for. */
  private sharedShell(): RunListView {
    this.root.dataset.shared = "true";
    this.root.append(
      h("header", { class: "topbar" }, h("span", { class: "brand" }, "runwatch"), h("span", { class: "muted", id: "shared-note" }, "A shared run, read-only")),
      this.body,
    );
    this.body.classList.add("shared");
    // never shown: the app's other parts expect a list
    const unused = new RunListView(null, "", () => undefined, () => undefined, this.selection, () => undefined);
    const run = this.state.run;
    if (!run) {
      this.body.replaceChildren(h("main", { class: "detail" }, h("p", { class: "error", id: "load-error" }, "This share link names no run; ask for a new link.")));
      return unused;
    }
    const view = new DetailView(run, this.state.tab, (tab) => this.go({ tab }, false), () => undefined);
    this.detail = view;
    this.body.replaceChildren(view.el);
    view.el.append(h("p", { class: "muted" }, "Loading…"));
    view.open().catch((e: unknown) => this.loadFailed(view.el, e));
    return unused;
  }

  private openRun(runId: string): void {
    // the run shown, clicked again: a load the server did not answer is made again now
    if (this.state.page === "runs" && this.state.run === runId) this.detail?.loadAgain();
    this.go({ page: "runs", run: runId, tab: "overview" });
  }

  private openCompare(runIds: string[]): void {
    this.go({ page: "compare", compare: { ...this.state.compare, runs: runIds, baseline: null, subject: null } });
  }

  /** What j, k, x, Enter and / act on: the run table on its page, else the list. */
  private keyTarget(): KeyTarget | null {
    const on = this.state.page === "table" ? this.table : this.state.page === "runs" || this.state.page === "compare" ? this.list : null;
    if (!on) return null;
    return {
      rows: () => on.rowEls,
      search: () => on.searchInput,
      open: (row) => row.dataset.run && this.openRun(row.dataset.run),
      toggle: (row) => row.dataset.run && this.selection.toggle(row.dataset.run),
    };
  }

  private async loadProjects(): Promise<void> {
    let projects: { name: string; runs: number }[];
    try {
      ({ projects } = await getJSON<{ projects: { name: string; runs: number }[] }>("/projects"));
    } catch {
      return; // the server did not answer: the list says so, and "All projects" stays
    }
    for (const p of projects) this.projectSelect.appendChild(h("option", { value: p.name }, `${p.name} (${p.runs})`));
    this.projectSelect.value = this.state.project ?? "";
  }

  private go(change: Partial<UrlState>, push = true): void {
    const before = this.state;
    this.state = { ...this.state, ...change };
    if (before.shared) {
      // a shared page stays on its run: only the tab changes
      this.state = { ...before, tab: this.state.tab };
      writeUrl(this.state, false);
      return;
    }
    const pageChanged = this.state.page !== before.page;
    const changed =
      pageChanged ||
      (this.state.page === "runs" && this.state.run !== before.run) ||
      (this.state.page === "compare" && this.state.compare.runs.join("\n") !== before.compare.runs.join("\n"));
    writeUrl(this.state, push && changed);
    if (changed) this.render();
  }

  private disposePages(): void {
    this.detail?.dispose();
    this.detail = null;
    this.compare?.dispose();
    this.compare = null;
    this.table?.dispose();
    this.table = null;
    this.page?.dispose?.();
    this.page = null;
  }

  private render(): void {
    this.list.select(this.state.page === "runs" ? this.state.run : null);
    this.disposePages();
    this.root.dataset.page = this.state.page;
    if (this.state.page === "new" || this.state.page === "resources" || this.state.page === "tokens") {
      const page = this.state.page === "new" ? new NewJobPage((run) => this.openRun(run), () => this.go({ page: "runs" })) : this.state.page === "tokens" ? new TokensPage() : new ResourcesPage((run) => this.openRun(run));
      this.page = page;
      this.body.replaceChildren(page.el);
      void page.load();
      return;
    }
    if (this.state.page === "table") {
      const table = new RunTablePage(
        this.state.table,
        this.state.project,
        this.state.q,
        this.selection,
        (t) => this.go({ table: t }, false),
        (q) => {
          this.go({ q }, false);
          this.list.setQuery(q);
        },
        (run) => this.openRun(run),
        (runs) => this.openCompare(runs),
      );
      this.table = table;
      this.body.replaceChildren(table.el);
      void table.load();
      return;
    }
    if (!this.body.contains(this.list.el)) this.body.replaceChildren(this.list.el, this.placeholder);
    const current = this.body.children[1];
    if (this.state.page === "compare") {
      // the URL may name runs by name: the view ticks them by id once it has read them
      const view = new CompareView(this.state.compare, (c) => this.go({ compare: c }, true), (run) => this.openRun(run), (ids) => this.selection.set(ids));
      this.compare = view;
      current.replaceWith(view.el);
      view.el.append(h("p", { class: "muted" }, "Loading…"));
      view.load().catch((e: unknown) => this.loadFailed(view.el, e));
      return;
    }
    if (!this.state.run) {
      current.replaceWith(this.placeholder);
      return;
    }
    const view = new DetailView(
      this.state.run,
      this.state.tab,
      (tab) => this.go({ tab }, false),
      (run) => this.list.upsert(run),
    );
    this.detail = view;
    current.replaceWith(view.el);
    view.el.append(h("p", { class: "muted" }, "Loading…"));
    view.open().catch((e: unknown) => this.loadFailed(view.el, e));
  }

  private loadFailed(el: HTMLElement, e: unknown): void {
    // an API's refusal is the page's to say, and it does; anything else is a fault to report
    if (!(e instanceof ApiError)) console.error(e);
    el.replaceChildren(h("p", { class: "error", id: "load-error" }, e instanceof Error ? e.message : String(e)));
  }
}

new App();
