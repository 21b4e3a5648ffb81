// The health panel: the health engine's open findings with their advice and, folded under
// them, the critical and warning findings that have resolved (a NaN that came and went),
// so that a later look at the run still shows what went wrong. Shown only when it has some.
// A finding names its metrics by their canonical names; the panel names each as the run
// logged it (as the finding's message does), the canonical name in its tooltip.

import { getJSON, runPath } from "./api";
import { canonicalName, findName } from "./chartspecs";
import { FailureLine, h } from "./dom";
import type { Finding, HealthResponse } from "./types";

// The resolved findings the panel keeps: an info is worth knowing only while it holds
// (`runwatch runs health` lists every one).
const RESOLVED_KEPT = ["critical", "warning"];

function steps(f: Finding): string {
  if (f.first_step === null) return "";
  return f.last_step !== null && f.last_step !== f.first_step ? `steps ${f.first_step}–${f.last_step}` : `step ${f.first_step}`;
}

/** What the run logged canonical metric `name` as (a TRL run's `kl` for
 * `fb/loss/kl_ref/mean`), as the health engine's messages name it: the key that holds it
 * as is, else "<name> (from <key>)" for one read through a transform (a perplexity read as
 * a loss), else the name itself. */
function loggedName(keys: Set<string>, name: string): string {
  const key = findName(keys, name);
  if (key) return key;
  const read = [...keys].sort().find((k) => canonicalName(k)[0] === name);
  return read ? `${name} (from ${read})` : name;
}

/** A metric of a finding's footer: as the run logged it, the canonical name in its tooltip. */
function metricEl(keys: Set<string>, name: string): HTMLElement {
  const shown = loggedName(keys, name);
  return h("span", { "data-metric": name, ...(shown !== name ? { title: `canonical name: ${name}` } : {}) }, shown);
}

function findingEl(f: Finding, keys: Set<string>): HTMLElement {
  const resolved = f.status === "resolved";
  const when = [steps(f), resolved ? "resolved" : ""].filter(Boolean).join(" · ");
  return h(
    "div",
    { class: `finding severity-${f.severity.toLowerCase()}${resolved ? " resolved" : ""}` },
    h("div", {}, h("span", { class: "sev" }, f.severity), " ", h("b", {}, f.title), " ", h("span", { class: "muted" }, when)),
    f.message ? h("p", {}, f.message) : null,
    f.advice ? h("p", { class: "advice" }, f.advice) : null,
    h("p", { class: "muted small" }, `${f.rule_id} · `, ...f.metrics.flatMap((m, i) => [i ? ", " : "", metricEl(keys, m)])),
  );
}

/** "1 critical, 2 warnings": how many `found` hold of each kept severity. */
function severityCounts(found: Finding[]): string {
  return RESOLVED_KEPT.flatMap((sev) => {
    const n = found.filter((f) => f.severity.toLowerCase() === sev).length;
    if (!n) return [];
    return [`${n} ${sev === "warning" && n > 1 ? "warnings" : sev}`];
  }).join(", ");
}

export class HealthPanel {
  readonly el = h("section", { class: "card health", id: "health", hidden: "" });
  private available = false;
  private open: Finding[] = [];
  private resolved: Finding[] = [];
  // how many findings had resolved (infos too) when `resolved` was read: the stream tells
  // this count, not the findings, so a count that differs reads them again
  private resolvedCount = 0;
  private reads = 0;
  private failure = new FailureLine("health-error", "The resolved findings could not be read.");
  private folded = h("details", { class: "health-resolved", id: "health-resolved" });
  // the keys the run logged: a finding's metrics are named as the run logged them
  private keys = new Set<string>();

  constructor(private readonly runId: string) {}

  /** The run logged these keys (its keys when the pane loads, then each new one). */
  addKeys(keys: Iterable<string>): void {
    for (const k of keys) this.keys.add(k);
  }

  /** Read the run's findings, the resolved ones too, and show them; returns the open ones
   * (the charts mark them). */
  async load(): Promise<Finding[]> {
    const read = ++this.reads;
    const resp = await this.readAll();
    if (read === this.reads) this.showAll(resp);
    return this.open;
  }

  /**
   * The run stream's news of its findings: the open ones, and how many have resolved (the
   * stream lists no resolved finding). The open ones show at once; a count of resolved
   * findings that changed reads them again.
   */
  update(resp: HealthResponse): void {
    // a read under way may hold older findings than these: its answer is dropped
    const read = ++this.reads;
    this.available = resp.available;
    this.open = resp.findings;
    this.render();
    if (resp.resolved !== this.resolvedCount) void this.readAgain(read);
  }

  private readAll(): Promise<HealthResponse> {
    return getJSON<HealthResponse>(`${runPath(this.runId)}/health`, { resolved: "true" });
  }

  private async readAgain(read: number): Promise<void> {
    let resp: HealthResponse;
    try {
      resp = await this.readAll();
    } catch (e) {
      if (read !== this.reads) return;
      this.failure.show(e, "They are read again at the run's next change of health, or reload the page.");
      this.render();
      return;
    }
    if (read === this.reads) this.showAll(resp);
  }

  private showAll(resp: HealthResponse): void {
    this.failure.clear();
    this.available = resp.available;
    this.open = resp.findings.filter((f) => f.status !== "resolved");
    this.resolved = resp.findings.filter((f) => f.status === "resolved" && RESOLVED_KEPT.includes(f.severity.toLowerCase()));
    this.resolvedCount = resp.resolved;
    this.render();
  }

  private render(): void {
    const n = this.open.length;
    this.el.hidden = this.failure.el.hidden && (!this.available || (n === 0 && this.resolved.length === 0));
    if (this.el.hidden) return;
    // the resolved part stays as the reader left it, folded or not
    this.folded.replaceChildren(h("summary", {}, `Resolved earlier in the run: ${severityCounts(this.resolved)}`), ...this.resolved.map((f) => findingEl(f, this.keys)));
    this.el.replaceChildren(
      h("div", { class: "card-head" }, h("h3", {}, `Health · ${n ? `${n} open finding${n === 1 ? "" : "s"}` : "no open findings"}`)),
      this.failure.el,
      ...this.open.map((f) => findingEl(f, this.keys)),
      ...(this.resolved.length ? [this.folded] : []),
    );
  }
}
