// Entry point: the app shell, URL state (/runs?project=…&run=…, /new, /resources) and routing.

import "./style.css";
import { getJSON } from "./api";
import { DetailView } from "./detail";
import { h } from "./dom";
import { LiveStream } from "./live";
import { NewJobPage } from "./newjob";
import { ResourcesPage } from "./resources";
import { RunListView } from "./runlist";
import type { RunSummary } from "./types";

type Page = "runs" | "new" | "resources";

const PAGE_PATHS: Record<Page, string> = { runs: "/runs", new: "/new", resources: "/resources" };

interface UrlState {
  page: Page;
  project: string | null;
  run: string | null;
  q: string;
  tab: string;
}

function readUrl(): UrlState {
  const u = new URL(window.location.href);
  const p = u.searchParams;
  return {
    page: u.pathname.startsWith("/new") ? "new" : u.pathname.startsWith("/resources") ? "resources" : "runs",
    project: p.get("project"),
    run: p.get("run"),
    q: p.get("q") ?? "",
    tab: p.get("tab") ?? "overview",
  };
}

function writeUrl(s: UrlState, push: boolean): void {
  const p = new URLSearchParams();
  if (s.project) p.set("project", s.project);
  if (s.run) p.set("run", s.run);
  if (s.q) p.set("q", s.q);
  if (s.tab && s.tab !== "overview") p.set("tab", s.tab);
  const qs = p.toString();
  const url = `${PAGE_PATHS[s.page]}${qs ? `?${qs}` : ""}`;
  if (url === `${window.location.pathname}${window.location.search}`) return;
  if (push) history.pushState(null, "", url);
  else history.replaceState(null, "", url);
}

class App {
  private state = readUrl();
  private root = document.getElementById("app") as HTMLElement;
  private projectSelect = h("select", { id: "project", "aria-label": "Project" }, h("option", { value: "" }, "All projects"));
  private body = h("div", { class: "layout" });
  private list: RunListView;
  private detail: DetailView | null = null;
  // the New job or Resources page while one is open
  private page: { el: HTMLElement; dispose?: () => void } | null = null;
  private placeholder = h("main", { class: "detail empty-detail" }, h("p", { class: "muted" }, "Select a run on the left."));

  constructor() {
    const newJob = h("button", { class: "btn primary", id: "new-job-button" }, "+ New job");
    newJob.addEventListener("click", () => this.go({ page: "new", run: null }));
    this.projectSelect.addEventListener("change", () => {
      this.go({ project: this.projectSelect.value || null, run: null });
      this.list.setProject(this.state.project);
    });
    const link = (label: string, page: Page, attrs: Record<string, string>) => {
      const a = h("a", { href: PAGE_PATHS[page], ...attrs }, label);
      a.addEventListener("click", (e) => {
        e.preventDefault();
        this.go({ page, run: null });
      });
      return a;
    };
    const brand = link("runwatch", "runs", { class: "brand" });
    const resources = link("Resources", "resources", { class: "nav-link", id: "resources-link" });
    this.root.append(h("header", { class: "topbar" }, brand, h("span", { class: "muted" }, "Training jobs"), this.projectSelect, resources, h("span", { class: "spacer" }), newJob), this.body);
    this.list = new RunListView(
      this.state.project,
      this.state.q,
      (run) => this.go({ run: run.run_id, page: "runs", tab: "overview" }),
      (q) => this.go({ q }, false),
    );
    window.addEventListener("popstate", () => {
      this.state = readUrl();
      this.render();
    });
    // the stream says `ready` once it watches; listing again then closes the gap between
    // the first list and the stream's start
    new LiveStream("/api/stream/runs", {
      run: (d) => {
        const run = d as RunSummary;
        this.list.upsert(run);
        // a cancel request changes the index alone: the run's own stream has no event for it
        if (run.run_id === this.state.run) this.detail?.update(run, false);
      },
      ready: () => void this.list.reload(),
    });
    void this.loadProjects();
    void this.list.reload();
    this.render();
  }

  private async loadProjects(): Promise<void> {
    const { projects } = await getJSON<{ projects: { name: string; runs: number }[] }>("/projects");
    for (const p of projects) this.projectSelect.appendChild(h("option", { value: p.name }, `${p.name} (${p.runs})`));
    this.projectSelect.value = this.state.project ?? "";
  }

  private go(change: Partial<UrlState>, push = true): void {
    const runChanged = change.run !== undefined && change.run !== this.state.run;
    const pageChanged = change.page !== undefined && change.page !== this.state.page;
    this.state = { ...this.state, ...change };
    writeUrl(this.state, push && (runChanged || pageChanged));
    if (runChanged || pageChanged) this.render();
  }

  private render(): void {
    this.list.select(this.state.run);
    this.page?.dispose?.();
    this.page = null;
    this.root.dataset.page = this.state.page;
    if (this.state.page !== "runs") {
      this.detail?.dispose();
      this.detail = null;
      const open = (run: string) => this.go({ page: "runs", run, tab: "overview" });
      const page = this.state.page === "new" ? new NewJobPage(open, () => this.go({ page: "runs" })) : new ResourcesPage(open);
      this.page = page;
      this.body.replaceChildren(page.el);
      void page.load();
      return;
    }
    if (!this.body.contains(this.list.el)) this.body.replaceChildren(this.list.el, this.placeholder);
    const current = this.body.children[1];
    if (!this.state.run) {
      this.detail?.dispose();
      this.detail = null;
      current.replaceWith(this.placeholder);
      return;
    }
    this.detail?.dispose();
    const view = new DetailView(
      this.state.run,
      this.state.tab,
      (tab) => this.go({ tab }, false),
      (run) => this.list.upsert(run),
    );
    this.detail = view;
    current.replaceWith(view.el);
    view.el.append(h("p", { class: "muted" }, "Loading…"));
    view.load().catch((e: unknown) => {
      console.error(e);
      view.el.replaceChildren(h("p", { class: "error", id: "load-error" }, e instanceof Error ? e.message : String(e)));
    });
  }
}

new App();
