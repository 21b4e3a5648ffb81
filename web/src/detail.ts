// The detail pane of one run: header, actions, tiles, charts, history, cards,
// live logs and the Rollouts tab, kept current by the run's event stream. A new attempt
// (a retry, or a requeue after a failure) loads the pane again from empty charts.

import { ApiError, getJSON, getOverlay, postJSON, runPath } from "./api";
import { ChartsPanel, pointBudget } from "./charts";
import { CostCard } from "./costcard";
import { append, clear, h, MARKS, painted, text } from "./dom";
import { attemptText, fmtDuration, fmtNum, fmtTime, liveDuration, runStatusClass, statusLabel, statusText } from "./format";
import { TERMINAL_PHASES } from "./format.gen";
import { HealthPanel } from "./health";
import { HistoryTable } from "./history";
import { LiveStream } from "./live";
import { LogsView } from "./logs";
import { READ_AGAIN, READ_AGAIN_MS } from "./retry";
import { RolloutsView } from "./rollouts";
import type { ActionAnswer, HealthResponse, JobSpec, LogEntry, MetricKeys, PointsEvent, RunDetail, SeriesData, RunSummary, TileKey } from "./types";

/** Set an element's text only when it changed (a selection in it stays). */
function setText(el: HTMLElement, value: string): void {
  if (el.textContent !== value) el.textContent = value;
}

function tile(label: string, value: string, id?: string): HTMLElement {
  return h("div", { class: "tile", ...(id ? { "data-tile": id } : {}) }, h("div", { class: "tile-label" }, label), h("div", { class: "tile-value", title: value }, value));
}

/** An argument list as one shell command line (quoted where a shell would need it). */
function commandLine(argv: string[]): string {
  return argv.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'"'"'`)}'`)).join(" ");
}

function jobRows(job: JobSpec | null, run: RunSummary): [string, unknown][] {
  if (!job) return [["Job", "started by hand (not through the queue)"]];
  return [
    ["Job", job.kind === "recipe" ? `recipe ${job.recipe ?? ""}` : "command"],
    ["Command", commandLine(job.argv)],
    ["Working folder", job.cwd],
    ["Devices", `${job.devices} × ${job.device_profile}`],
    ["Priority", job.priority],
    ["Attempt", attemptText(run.attempt, job.max_attempts)],
    ["Worker", job.worker_id],
  ];
}

/** The run's stage with its progress, as `runwatch runs get` shows it: "tokenizing
 * (30/100)". The progress is the detail's, shown only while the stage it was read with is
 * the one the run reports now (the run's stream brings a new stage before its detail). */
function stageText(d: RunDetail): string | null {
  const stage = d.run.stage;
  const progress = d.state.stage === stage ? d.state.progress : null;
  return stage && progress ? `${stage} (${progress.done ?? 0}/${progress.total})` : stage;
}

/** A label as a `data-row` name: "Observed step" → "observed-step". */
function rowName(label: string): string {
  return label.toLowerCase().replace(/[^a-z0-9]+/g, "-");
}

function kv(rows: [string, unknown][]): HTMLElement {
  return h(
    "dl",
    { class: "kv" },
    ...rows.flatMap(([k, v]) => [
      h("dt", {}, k),
      h("dd", { "data-row": rowName(k) }, v instanceof Node ? v : v === null || v === undefined || v === "" ? "—" : typeof v === "object" ? JSON.stringify(v) : String(v)),
    ]),
  );
}

/** Open another run's page in this app (the app follows the URL on popstate). */
function runLink(runId: string, label: string, attrs: Record<string, string> = {}): HTMLElement {
  const href = `/runs?run=${encodeURIComponent(runId)}`;
  const a = h("a", { href, ...attrs }, label);
  a.addEventListener("click", (e) => {
    if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    history.pushState(null, "", href);
    window.dispatchEvent(new PopStateEvent("popstate"));
  });
  return a;
}

/** The model a run trains: a run started from an earlier run (init_from) names the base
 * model at the start of the chain and links the run it started from. */
function modelValue(d: RunDetail): Node | string | null {
  const m = d.model;
  if (!m.init_from) return d.run.base_model;
  const el = h("span", { id: "model-origin" }, h("span", { "data-model": "base" }, m.base_model ?? "unknown base model"));
  if (m.parent) el.append(" · from run ", runLink(m.parent.run_id, m.parent.name, { id: "parent-run", title: m.init_from }));
  else el.append(" · from ", h("span", { class: "muted" }, `${m.init_from} (no run in the index holds it)`));
  return el;
}

// [label, scalar, shown for GRPO, shown for other methods]: GRPO's training loss is no
// progress signal (the spec), so its tiles centre on reward; the rest show when logged.
const SCALAR_TILES: [string, TileKey, boolean, boolean][] = [
  // the API's `steps` is the last step observed (a run logging steps 0-85 is at 85)
  ["Last step", "steps", true, true],
  ["Examples", "examples", true, true],
  ["Tokens", "tokens", true, true],
  ["Grad accum", "grad_accum", true, true],
  ["Best train loss", "best_train_loss", false, true],
  ["Latest train loss", "latest_train_loss", false, true],
  ["Eval loss", "eval_loss", true, true],
  ["Latest mean reward", "mean_reward", true, true],
  ["Best mean reward", "best_mean_reward", true, true],
  ["Reward std", "reward_std", true, true],
  ["Val reward", "val_reward", true, true],
  ["Val accuracy", "val_accuracy", true, true],
  ["Preference accuracy", "preference_accuracy", true, true],
  ["Mean margin", "margin", true, true],
  ["Val preference accuracy", "val_preference_accuracy", true, true],
  ["Val margin", "val_margin", true, true],
];

// While points arrive, the detail (tiles, job details, cost) is read again at most this often.
const LIVE_MS = 1000;

export class DetailView {
  readonly el = h("main", { class: "detail", id: "detail" });
  private detail: RunDetail | null = null;
  private detailAt = 0;
  private charts: ChartsPanel | null = null;
  private logs: LogsView | null = null;
  private rollouts: RolloutsView | null = null;
  private health: HealthPanel | null = null;
  private history: HistoryTable | null = null;
  private stream: LiveStream | null = null;
  private notice = h("div", { class: "notice", role: "status" });
  private header = h("header", { class: "detail-head" });
  private tilesEl = h("div", { class: "tiles" });
  private scalarsEl = h("div", { class: "tiles scalars", id: "scalars" });
  private cardsEl = h("div", { class: "cards" });
  private cost = new CostCard();
  // the cards stay in place as the detail is read again (an open Settings stays open)
  private jobCard = h("section", { class: "card", id: "job-details" });
  private artifacts = h("pre", { class: "code" });
  private problemsCard = h("section", { class: "card", id: "problems", hidden: "" });
  private configText = h("pre", { class: "code" });
  private engineText = h("pre", { class: "code" });
  private settings = h("details", { class: "card", id: "settings" }, h("summary", {}, h("h3", {}, "Settings")));
  private headerShown = "";
  private liveTimer: number | undefined;
  private overview = h("div", { class: "tab-body", "data-tab": "overview" });
  private rolloutsEl = h("div", { class: "tab-body", "data-tab": "rollouts", hidden: "" });
  private lastStep: number | null = null;
  private cursor = "";
  private ticker: number | undefined;
  private disposed = false;
  // which load() is current: a new attempt starts another, and the older one stops
  private generation = 0;
  private refreshing: Promise<void> | null = null;
  private refreshAgain = false;
  // how many new phases the page has shown without a read (see update and refresh)
  private phaseChanges = 0;
  // the notice of the last failed read of the detail: the next read that answers clears it
  private readFailure: string | null = null;
  // a load the server did not answer: what the pane says, and when it is made again (open)
  private loadError: HTMLElement | null = null;
  private loadAgainTimer: number | undefined;

  constructor(
    private readonly runId: string,
    private tab: string,
    private readonly onTab: (tab: string) => void,
    private readonly onRunChanged: (run: RunSummary) => void,
  ) {}

  /**
   * Load the pane. A load the server did not answer (it is down, or failed: status 0 or
   * 5xx) says so in the pane and is made again every READ_AGAIN_MS until it answers, or at
   * once by `loadAgain` (a click on the run in the list); any other refusal (no such run)
   * is said and left. Only the server's failures (ApiError) are caught.
   */
  async open(): Promise<void> {
    window.clearTimeout(this.loadAgainTimer);
    this.loadAgainTimer = undefined;
    try {
      await this.load();
    } catch (e) {
      if (!(e instanceof ApiError)) throw e;
      if (this.disposed) return;
      // what the failed load made (its charts' and history's reads) stops with it
      this.stopLive();
      const again = e.status === 0 || e.status >= 500;
      this.loadError = h("p", { class: "error", id: "load-error" }, again ? `${e.message} ${READ_AGAIN}` : e.message);
      this.el.replaceChildren(this.loadError);
      if (again) this.loadAgainTimer = window.setTimeout(() => void this.open(), READ_AGAIN_MS);
    }
  }

  /** Make a load the server did not answer again now, rather than at its next try. */
  loadAgain(): void {
    if (this.loadAgainTimer !== undefined) void this.open();
  }

  private async load(): Promise<void> {
    const gen = ++this.generation;
    const stale = () => this.disposed || gen !== this.generation;
    performance.mark(MARKS.open);
    // The keys come first: their cursor is where the live stream starts, and everything
    // fetched after them (the detail, logs, history) is at least that new. The charts' first
    // series come with them (GET /api/overlay, the cursor taken first); the pane is built
    // while they travel. The detail is asked for once they came, not beside them: on the
    // server (one process) its read would share the cores with theirs, and the charts wait
    // for theirs alone (docs/benchmarks.md, "Cold open").
    // a click on a chart's point opens its step in the History
    const charts = (this.charts = new ChartsPanel(this.runId, (step) => this.history?.goTo(step)));
    const first = this.keysAndSeries(charts);
    this.logs = new LogsView(this.runId);
    this.health = new HealthPanel(this.runId);
    const history = (this.history = new HistoryTable(this.runId));
    this.overview.replaceChildren(this.tilesEl, this.scalarsEl, this.health.el, this.charts.el, history.el, this.cardsEl, this.logs.el);
    const frame = [this.header, this.notice, this.overview, this.rolloutsEl];
    // a load made again keeps saying why until the server answers (no empty frame between)
    if (!this.loadError) this.el.replaceChildren(...frame);
    const { keys, series } = await first;
    if (stale()) return;
    if (this.loadError) {
      this.loadError = null;
      this.el.replaceChildren(...frame);
    }
    const detailLoaded = getJSON<RunDetail>(runPath(this.runId)).then((detail) => {
      if (stale()) return;
      if (this.lastStep === null || (detail.scalars.steps ?? -1) > this.lastStep) this.lastStep = detail.scalars.steps;
      this.show(detail);
    });
    const logs = this.logs;
    const health = this.health;
    health.addKeys(keys.keys.filter((k) => k.count > 0).map((k) => k.key));
    const chartsLoaded = charts.load(keys.keys, series);
    // What lies below the charts waits for their series: on a cold server the history's
    // first page costs more than every chart together, and asked for at once it delays them.
    // It waits for the charts to be painted too: its table, made first, delayed that paint.
    const below = chartsLoaded.catch(() => undefined).then(() => painted()).then(() => Promise.all([
      history.init(keys.keys),
      logs.load(),
      health.load().then((f) => charts.setFindings(f)),
    ]));
    await Promise.all([detailLoaded, chartsLoaded, below]);
    this.cursor = keys.cursor;
    if (stale()) return;
    this.showTab(this.tab);
    this.stream = new LiveStream(`/api${runPath(this.runId)}/stream?cursor=${encodeURIComponent(this.cursor)}`, {
      points: (d) => this.onPoints(d as PointsEvent[]),
      log: (d) => this.logs?.append(d as LogEntry),
      phase: (d) => this.update(d as RunSummary, true),
      health: (d) => {
        const resp = d as HealthResponse;
        this.health?.update(resp);
        this.charts?.setFindings(resp.findings);
      },
    }, (up) => this.el.classList.toggle("offline", !up));
    this.ticker = window.setInterval(() => this.tickDuration(), 1000);
    this.el.dataset.loaded = "true";
  }

  /**
   * The run's keys and stream cursor, with the whole series of the charts `charts` shows
   * first, in one request (a share link's page too: the link opens it for its own run);
   * where that request is refused (too many series), the keys alone, and the charts ask
   * for their series.
   */
  private async keysAndSeries(charts: ChartsPanel): Promise<{ keys: MetricKeys; series: SeriesData[] | null }> {
    try {
      const ov = await getOverlay([this.runId], charts.selectors(), { points: pointBudget(this.el.clientWidth / 2) });
      performance.mark(MARKS.answered);
      const run = ov.runs[0];
      if (run) return { keys: { ok: true, cursor: run.cursor, keys: run.keys }, series: ov.series };
    } catch (e) {
      if (!(e instanceof ApiError) || e.status !== 400) throw e;
    }
    return { keys: await getJSON<MetricKeys>(`${runPath(this.runId)}/metrics/keys`), series: null };
  }

  private onPoints(batch: PointsEvent[]): void {
    this.history?.onPoints(batch);
    for (const ev of batch) {
      this.health?.addKeys(Object.keys(ev.values));
      this.charts?.applyPoints(ev);
      if (this.lastStep === null || ev.step > this.lastStep) this.lastStep = ev.step;
    }
    const steps = this.scalarsEl.querySelector('[data-tile="steps"] .tile-value');
    if (steps) steps.textContent = fmtNum(this.lastStep);
    const observed = this.jobCard.querySelector('[data-row="observed-step"]');
    if (observed && this.lastStep !== null) observed.textContent = String(this.lastStep);
    // the other tiles, the job details and the cost follow from the detail read again
    if (this.liveTimer === undefined) {
      this.liveTimer = window.setTimeout(() => {
        this.liveTimer = undefined;
        void this.refresh();
      }, LIVE_MS);
    }
  }

  /**
   * The run's list fields changed: from its stream's phase event (`always`), or from the
   * run list's stream, which also tells of a change job control makes in the index alone
   * (a cancel request). A new attempt loads the pane again; another change of phase,
   * stage or reason (any phase event) fetches the detail again.
   */
  update(run: RunSummary, always: boolean): void {
    const prev = this.detail?.run;
    if (!prev) return; // loading: what it fetches is at least this new
    if (always) this.onRunChanged(run); // the list's own stream has told the list
    if (run.status !== prev.status) this.setNotice(""); // a notice is about the phase before
    if (run.attempt > prev.attempt || (TERMINAL_PHASES.includes(prev.status) && !TERMINAL_PHASES.includes(run.status))) {
      this.restart(run.status);
      return;
    }
    if (!always && run.status === prev.status && run.reason === prev.reason && run.stage === prev.stage && run.process_gone === prev.process_gone) return;
    if (run.status !== prev.status) {
      // the new phase shows at once; the detail fetched next brings its actions and cards
      this.phaseChanges++;
      this.detail = { ...this.detail!, run, actions: { cancel: false, retry: false }, failure: null };
      this.el.dataset.status = run.status;
      this.renderHeader();
    }
    void this.refresh();
  }

  /** Fetch the detail again; calls while one is under way make one more fetch after it. */
  private async refresh(): Promise<void> {
    if (this.refreshing) {
      this.refreshAgain = true;
      return this.refreshing;
    }
    const gen = this.generation;
    this.refreshing = (async () => {
      do {
        this.refreshAgain = false;
        const phases = this.phaseChanges;
        const detail = await getJSON<RunDetail>(runPath(this.runId));
        if (this.disposed || gen !== this.generation) return;
        // the page showed a new phase while this read travelled (an action's answer, a
        // stream's event), and asked for another read: that one shows it, and this one,
        // which may hold the phase before, is not shown (the phase would go back, and the
        // next change would clear the notice as if the phase were new). A run has few
        // phases, so reads are skipped a few times at most.
        if (!(this.refreshAgain && phases !== this.phaseChanges)) this.show(detail);
        // a read that failed before (the server was down) said so: this one answered
        if (this.notice.textContent === this.readFailure) this.setNotice("");
      } while (this.refreshAgain);
    })()
      .catch((e: unknown) => {
        this.readFailure = `The run's details could not be read again. ${e instanceof Error ? e.message : String(e)} They are read again at its next change, or reload the page.`;
        this.setNotice(this.readFailure, true);
      })
      .finally(() => {
        this.refreshing = null;
      });
    return this.refreshing;
  }

  private show(detail: RunDetail): void {
    this.detail = detail;
    this.detailAt = Date.now();
    this.el.dataset.status = detail.run.status;
    this.el.dataset.attempt = String(detail.run.attempt);
    // the header (its buttons and tabs) is drawn again only when what it shows changed
    const { duration_s: _d, observed_step: _o, saved_step: _s, ...headed } = detail.run;
    const shown = JSON.stringify([headed, detail.state.progress, detail.summary, detail.failure, detail.actions]);
    if (shown !== this.headerShown) {
      this.renderHeader();
      this.headerShown = shown;
    }
    this.renderTiles();
    this.renderCards();
  }

  /** Load the pane again, from empty charts: the run's points are a new attempt's now. */
  private restart(status: string): void {
    this.el.dataset.status = status;
    this.stopLive();
    this.detail = null;
    this.lastStep = null;
    this.rollouts = null;
    this.rolloutsEl.replaceChildren();
    delete this.el.dataset.loaded;
    void this.open();
  }

  private setNotice(message: string, error = false): void {
    this.notice.textContent = message;
    this.notice.classList.toggle("error", error);
  }

  private renderHeader(): void {
    const d = this.detail;
    if (!d) return;
    this.headerShown = "";
    const run = d.run;
    // why it ended: recorded, or, for a run started by hand whose process died without
    // recording an end, the server's verdict (the run keeps the phase it recorded)
    const failure = d.failure;
    const reason = failure?.reason ?? run.reason;
    // a run that was stopped did not fail: its reason is not shown as an error
    const stopped = run.status === "CANCELLED" ? "stopped" : "";
    const actions = h("div", { class: "actions" });
    if (d.actions.cancel) actions.appendChild(this.actionButton("Cancel", "cancel"));
    if (d.actions.retry) actions.appendChild(this.actionButton("Retry", "retry"));
    // a resume goes on from the run's last training checkpoint (docs/jobs.md, "Resume")
    if (d.actions.retry && run.saved_step !== null) actions.appendChild(this.actionButton("Resume", "retry", true));
    const tabs = h("nav", { class: "tabs" }, this.tabButton("Overview", "overview"), this.tabButton("Rollouts", "rollouts"));
    clear(this.header);
    append(this.header,
      h(
        "div",
        { class: "title-row" },
        h("h2", { id: "run-title", title: run.name }, run.name),
        h("span", { class: `badge ${runStatusClass(run)}`, id: "run-status" }, h("span", { class: "dot" }), statusText(run)),
        run.attempt > 1 ? h("span", { class: "badge", id: "run-attempt" }, `attempt ${run.attempt}`) : null,
        run.stage ? h("span", { class: "muted", id: "run-stage" }, stageText(d)) : null,
        actions,
      ),
      h("p", { class: "summary", id: "run-summary" }, d.summary),
      reason ? h("p", { class: `reason ${stopped}`, id: "run-reason" }, reason) : null,
      failure?.what_to_do ? h("p", { class: `what-to-do ${stopped}`, id: "what-to-do" }, h("strong", {}, "What to do: "), failure.what_to_do) : null,
      tabs,
    );
  }

  private actionButton(label: string, action: "cancel" | "retry", resume = false): HTMLElement {
    const b = h("button", { class: `btn ${action === "cancel" ? "danger" : ""}`, id: resume ? "action-resume" : `action-${action}`, title: resume ? "Go on from its last training checkpoint, keeping its metrics up to it" : "" }, label);
    b.addEventListener("click", async () => {
      b.disabled = true;
      this.setNotice("");
      try {
        const res = await postJSON<ActionAnswer>(`${runPath(this.runId)}/${action}`, resume ? { resume: true } : {});
        const shown = this.detail?.run;
        if (action === "cancel" && shown && shown.attempt === res.run.attempt && TERMINAL_PHASES.includes(shown.status) && !TERMINAL_PHASES.includes(res.run.status)) {
          // the run ended while the cancel's answer travelled (its stream said so first):
          // the answer holds the phase before the end, and a cancel never restarts a run
          this.setNotice(`The run ended (${shown.status.toLowerCase()}) before the cancel's answer came back.`);
          return;
        }
        this.update(res.run, true);
        this.setNotice(
          action === "retry"
            ? // who starts it: a worker of its profile, or how to start one when none runs
              resume
              ? `Queued again (${res.next ?? `attempt ${res.run.attempt}`}); the charts show the run up to its checkpoint once a worker starts it.`
              : `Queued again (${res.next ?? `attempt ${res.run.attempt}`}); the charts start empty.`
            : res.status === "CANCELLED"
              ? "Cancelled before it started."
              : // what stops it: its worker, or, when that worker is lost, which worker will
                `Cancel requested: ${res.next ?? "the job is told to stop, and is stopped for good after a grace period"}.`,
        );
      } catch (e) {
        b.disabled = false;
        this.setNotice(e instanceof ApiError ? e.message : String(e), true);
      }
    });
    return b;
  }

  private tabButton(label: string, tab: string): HTMLElement {
    const b = h("button", { class: `tab ${this.tab === tab ? "active" : ""}`, "data-tab-button": tab }, label);
    b.addEventListener("click", () => this.showTab(tab));
    return b;
  }

  private showTab(tab: string): void {
    this.tab = tab;
    this.onTab(tab);
    this.overview.hidden = tab !== "overview";
    this.rolloutsEl.hidden = tab !== "rollouts";
    for (const b of this.header.querySelectorAll<HTMLElement>("[data-tab-button]")) b.classList.toggle("active", b.dataset.tabButton === tab);
    if (tab === "rollouts" && !this.rollouts && this.detail) {
      this.rollouts = new RolloutsView(this.detail.run.run_id);
      this.rolloutsEl.replaceChildren(this.rollouts.el);
      void this.rollouts.load();
    }
  }

  private renderTiles(): void {
    const d = this.detail;
    if (!d) return;
    const run = d.run;
    this.tilesEl.replaceChildren(
      tile("Backend", run.backend ?? "—"),
      tile("Trainer", run.trainer ?? "—"),
      tile("Dataset", run.dataset ?? "—"),
      tile("Duration", fmtDuration(liveDuration(run, this.detailAt)), "duration"),
    );
    const s = { ...d.scalars };
    // a latest value that went NaN is sent as null, like one never logged: it reads NaN
    for (const id of d.scalars.non_finite ?? []) if (s[id] === null) s[id] = Number.NaN;
    // the points seen since the detail was read may be later than its step count
    if (this.lastStep !== null && (s.steps === null || this.lastStep > s.steps)) s.steps = this.lastStep;
    const grpo = (run.method ?? "").toLowerCase() === "grpo";
    const tiles = SCALAR_TILES.filter(([, id, forGrpo, forOthers]) => (grpo ? forGrpo : forOthers) && (s[id] !== null || id === "steps"));
    this.scalarsEl.dataset.method = grpo ? "grpo" : (run.method ?? "");
    this.scalarsEl.replaceChildren(...tiles.map(([l, id]) => tile(l, fmtNum(s[id]), id)));
  }

  private tickDuration(): void {
    this.cost.tick();
    const run = this.detail?.run;
    if (!run || run.ended_at || run.process_gone) return;
    const el = this.tilesEl.querySelector('[data-tile="duration"] .tile-value');
    if (el) el.textContent = fmtDuration(liveDuration(run, this.detailAt));
  }

  private renderCards(): void {
    const d = this.detail;
    if (!d) return;
    const run = d.run;
    const checkpoints = d.checkpoints ?? [];
    // the manifest's references, without the recording process's own fields
    const internal = new Set(["pid", "argv", "schema_version", "name", "project", "run_id", "method", "base_model", "dataset", "trainer", "backend", "tags", "group", "created_at"]);
    const refs: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(d.manifest)) if (!internal.has(k)) refs[k] = v;
    refs.checkpoints = checkpoints.map((c) => ({ step: c.step, kind: c.kind, id: c.id, path: c.path }));
    setText(this.configText, d.settings.config_text ?? "(no config recorded)");
    setText(this.engineText, d.settings.engine_config ? text(d.settings.engine_config) : "(no engine config recorded)");
    setText(this.artifacts, JSON.stringify(refs, null, 2));
    this.cost.show(d, this.detailAt);
    // a point seen since the detail was read may be later than its observed step
    const observed = this.lastStep !== null && (run.observed_step === null || this.lastStep > run.observed_step) ? this.lastStep : run.observed_step;
    this.jobCard.replaceChildren(
      h("h3", {}, "Job details"),
      kv([
        ["Model", modelValue(d)],
        ["Backend", run.backend],
        ["Trainer", run.trainer],
        ["Method", run.method],
        ["Status", statusLabel(run.status)],
        ["Stage", stageText(d)],
        ["Observed step", observed],
        ["Saved step", run.saved_step],
        ["Run id", run.run_id],
        ["Project", run.project],
        ["Group", run.group],
        ["Tags", run.tags.join(", ")],
        ["Created", fmtTime(run.created_at)],
        ["Started", fmtTime(run.started_at)],
        ["Ended", fmtTime(run.ended_at)],
        ["Failure reason", d.failure?.reason ?? run.reason],
        ...jobRows(d.job, run),
      ]),
    );
    this.problemsCard.hidden = !d.problems?.length;
    this.problemsCard.replaceChildren(h("h3", {}, "Indexing problems"), ...(d.problems ?? []).map((p) => h("p", { class: "muted small" }, p)));
    if (!this.cardsEl.childElementCount) {
      this.settings.append(h("h4", {}, "Config"), this.configText, h("h4", {}, "Engine config"), this.engineText);
      append(this.cardsEl, this.jobCard, this.cost.el, h("section", { class: "card", id: "artifacts" }, h("h3", {}, "Artifacts & refs"), this.artifacts), this.problemsCard, this.settings);
    }
  }

  private stopLive(): void {
    window.clearInterval(this.ticker);
    window.clearTimeout(this.liveTimer);
    this.liveTimer = undefined;
    this.stream?.close();
    this.stream = null;
    this.charts?.dispose();
    this.charts = null;
    this.history?.dispose();
  }

  dispose(): void {
    this.disposed = true;
    window.clearTimeout(this.loadAgainTimer);
    this.stopLive();
  }
}
