// The `runs compare` report in the compare view: one compared run's training loss against
// a baseline's (GET /api/compare): window means of the difference, gradient-norm spikes,
// the first full window past the margin, and how the runs divide their sequences per
// update. Runs whose plans differ are refused with the differences listed, unless
// "Compare across plans" is ticked. A run the API refuses to compare (a reinforcement run,
// one that logged no training loss) is not asked for: the card says why. A report the
// server did not answer is said in the card's failure line; the compare view asks for it
// again (retry.ts). Long run names and settings stay inside the card (compare.css): a
// picker cuts its run's name short and holds it in its tooltip; the message and the
// differences wrap.

import { plainError, query, send } from "./api";
import { findKey } from "./chartspecs";
import { FailureLine, h } from "./dom";
import { fmtNum } from "./format";
import { TERMINAL_PHASES } from "./format.gen";
import type { CompareReport, RunSummary } from "./types";

/** The method families GET /api/compare refuses with a 400: they record a reward, not a
 * training loss, at each step (runwatch.analysis.compare.REINFORCEMENT; a test checks that
 * the two lists agree). */
export const REINFORCEMENT = ["grpo", "ppo", "rl", "rloo", "dapo", "reinforce"];

/**
 * Why GET /api/compare would refuse `run` (its `keys`: those it logged a point of), in a
 * sentence; null where it can be compared. It refuses a reinforcement run and a run that
 * logged no training loss (docs/api.md, "Compare two runs").
 */
export function notComparable(run: RunSummary, keys: Set<string>): string | null {
  const method = run.method ?? "";
  if (REINFORCEMENT.includes(method.toLowerCase())) return `${run.name} is a reinforcement run (${method}): it records a reward at each step, not a training loss.`;
  if (findKey(keys, "train_loss") === undefined) return `${run.name} has logged no training loss${TERMINAL_PHASES.includes(run.status) ? "" : " yet"}.`;
  return null;
}

type PlanDifference = CompareReport["plan"]["differences"][number];

/** The error shape (docs/api.md); a 409 (runs of different plans, not asked across plans)
 * adds the plan differences. */
interface ErrorBody {
  error?: string;
  differences?: PlanDifference[];
}

// A long run has thousands of windows; the table shows the first ones and the reported one.
const MAX_ROWS = 30;

function differencesTable(diffs: PlanDifference[], id: string): HTMLElement {
  const cell = (v: unknown) => h("td", {}, v === null || v === undefined ? "—" : typeof v === "string" ? v : JSON.stringify(v));
  return h(
    "table",
    { class: "table plan-differences", id },
    h("thead", {}, h("tr", {}, h("th", {}, "Setting"), h("th", {}, "Run"), h("th", {}, "Baseline"))),
    h("tbody", {}, ...diffs.map((d) => h("tr", { class: "diff" }, h("td", { class: "mono" }, d.field), cell(d.run), cell(d.baseline)))),
  );
}

export class CompareReportPanel {
  readonly el: HTMLElement;
  private subject = h("select", { id: "compare-subject", "aria-label": "Run" });
  private baseline = h("select", { id: "compare-baseline", "aria-label": "Baseline" });
  private across = h("input", { type: "checkbox", id: "compare-across-plans" });
  private body = h("div", { id: "compare-report-body" });
  private generation = 0;
  readonly failure = new FailureLine("compare-report-error", "The report could not be read.");

  /**
   * `onChange` is told of a run, baseline or across-plans picked: it loads the report.
   * `why` says why the API would refuse a run (`notComparable` of its keys now), or null.
   */
  constructor(
    private readonly onChange: (baseline: string, subject: string, acrossPlans: boolean) => void,
    private readonly why: (runId: string) => string | null,
  ) {
    const changed = () => {
      this.showPicks();
      this.onChange(this.baseline.value, this.subject.value, this.across.checked);
    };
    for (const el of [this.subject, this.baseline, this.across]) el.addEventListener("change", changed);
    this.el = h(
      "section",
      { class: "card", id: "compare-report" },
      h(
        "div",
        { class: "card-head" },
        h("h3", {}, "Training loss against a baseline"),
        h("div", { class: "controls" }, h("label", {}, "Run ", this.subject), h("label", {}, "Baseline ", this.baseline), h("label", {}, this.across, " Compare across plans")),
      ),
      this.failure.el,
      this.body,
    );
  }

  /** The runs to pick from, and the picks; `load` reads the report. */
  show(runs: RunSummary[], baseline: string | null, subject: string | null, acrossPlans: boolean): void {
    const options = () => runs.map((r) => h("option", { value: r.run_id, title: r.name }, r.name));
    this.subject.replaceChildren(...options());
    this.baseline.replaceChildren(...options());
    if (subject) this.subject.value = subject;
    if (baseline) this.baseline.value = baseline;
    this.across.checked = acrossPlans;
    this.showPicks();
  }

  /** Each picker's tooltip names its run whole: a long name is cut short in it. */
  private showPicks(): void {
    for (const select of [this.subject, this.baseline]) select.title = select.selectedOptions[0]?.text ?? "";
  }

  /** Read the report of the runs picked, and show it. Throws (an ApiError) where the server
   * did not answer: the card says "Comparing…" until a read answers. */
  async load(): Promise<void> {
    const gen = ++this.generation;
    delete this.body.dataset.status;
    const run = this.subject.value;
    const baseline = this.baseline.value;
    if (!run || !baseline || run === baseline) {
      this.body.replaceChildren(h("p", { class: "muted" }, "Pick a run and a different baseline."));
      return;
    }
    // the API refuses them (400), which the browser logs as a failed request: say why here
    const reasons = [...new Set([run, baseline].map(this.why).filter((r): r is string => r !== null))];
    if (reasons.length) {
      const able = [...this.subject.options].filter((o) => this.why(o.value) === null).length;
      const next = able >= 2 ? "Pick two runs that log a training loss." : "The report compares the training loss of two supervised runs (SFT, DPO): compare two runs that log one.";
      this.body.replaceChildren(h("p", { class: "muted", id: "compare-not-comparable" }, `${reasons.join(" ")} ${next}`));
      return;
    }
    this.body.replaceChildren(h("p", { class: "muted" }, "Comparing…"));
    // always across plans: the answer lists the plans' differences, and the page refuses
    // runs of different plans itself until the box is ticked. Asked without it, the API's
    // expected refusal (409) was logged by the browser as a failed request.
    let resp: Response;
    try {
      resp = await send(`/api/compare${query({ run, baseline, across_plans: "true" })}`);
    } catch (e) {
      // a later pick's read says how it went
      if (gen === this.generation) throw e;
      return;
    }
    const answer = (await resp.json().catch(() => null)) as (CompareReport & ErrorBody) | null;
    if (gen !== this.generation) return;
    this.body.dataset.status = String(resp.status);
    if (!resp.ok || !answer) {
      this.refuse(plainError(answer?.error ?? null, resp.status).message, answer?.differences ?? []);
      return;
    }
    const diffs = answer.plan.differences;
    if (diffs.length && !this.across.checked) {
      const fields = diffs.map((d) => d.field).join(", ");
      this.refuse(`Runs ${answer.run.name} and ${answer.baseline.name} follow different plans (${fields}): their loss differs because of their plans as well as what they learned.`, diffs);
      return;
    }
    this.body.replaceChildren(...this.render(answer));
  }

  private refuse(message: string, diffs: PlanDifference[]): void {
    const refused = h("p", { class: "error", id: "compare-refused" }, message);
    this.body.replaceChildren(refused, ...(diffs.length ? [differencesTable(diffs, "compare-differences"), h("p", { class: "muted" }, "Tick “Compare across plans” to compare them anyway.")] : []));
  }

  private render(a: CompareReport): HTMLElement[] {
    const margin = a.options.margin;
    const verdict = a.reported
      ? `Steps ${a.reported.first_step}–${a.reported.last_step} are the first full window of ${a.options.window} whose mean difference passes ${margin}: the run's loss is ${a.reported.direction} by ${fmtNum(Math.abs(a.reported.mean_diff))} on average.`
      : `No full window of ${a.options.window} steps differs by more than ${margin} on average.`;
    const out: HTMLElement[] = [
      h("p", { id: "compare-verdict" }, verdict),
      h("p", { class: "muted" }, `${a.compared_steps} steps compared${a.first_step !== null ? ` (${a.first_step}–${a.last_step})` : ""}; difference = run − baseline.${a.nonfinite_steps.length ? ` ${a.nonfinite_steps.length} steps with a non-finite loss left out.` : ""}`),
    ];
    if (a.plan.divided_differently) {
      const d = (x: CompareReport["run"]) => `${x.division.devices ?? "?"} devices × ${x.division.sequences_per_pass ?? "?"} per pass × ${x.division.accumulation ?? "?"} accumulation = ${x.division.sequences_per_update ?? "?"}`;
      out.push(h("p", { id: "compare-division" }, `The runs divide the same sequences per update differently: run ${d(a.run)}; baseline ${d(a.baseline)}. They train the same rows.`));
    }
    if (a.plan.differences.length) {
      out.push(h("p", { class: "muted" }, "Compared across plans: these settings differ, so the loss differs because of them too."), differencesTable(a.plan.differences, "compare-differences"));
    }
    const rows = a.windows.slice(0, MAX_ROWS);
    if (a.reported && a.reported.index >= MAX_ROWS) rows.push(a.windows[a.reported.index]);
    out.push(
      h(
        "table",
        { class: "table", id: "compare-windows" },
        h("thead", {}, h("tr", {}, h("th", {}, "Steps"), h("th", {}, "Compared"), h("th", {}, "Run loss"), h("th", {}, "Baseline loss"), h("th", {}, "Mean difference"), h("th", {}, "Spikes"))),
        h(
          "tbody",
          {},
          ...rows.map((w) =>
            h(
              "tr",
              { class: [w.first_step === a.reported?.first_step ? "reported" : "", w.full ? "" : "partial"].join(" ").trim() },
              h("td", {}, `${w.first_step}–${w.last_step}`),
              h("td", {}, w.full ? String(w.steps) : `${w.steps} (short)`),
              h("td", {}, fmtNum(w.run_loss)),
              h("td", {}, fmtNum(w.baseline_loss)),
              h("td", {}, fmtNum(w.mean_diff)),
              h("td", {}, String(w.spikes)),
            ),
          ),
        ),
      ),
    );
    if (a.windows.length > rows.length) out.push(h("p", { class: "muted" }, `${a.windows.length - rows.length} more windows not shown (runwatch runs compare lists them all).`));
    if (a.spikes.length) {
      out.push(
        h("h4", {}, `Gradient-norm spikes (over ${a.options.spike_factor} × the median)`),
        h(
          "table",
          { class: "table", id: "compare-spikes" },
          h("thead", {}, h("tr", {}, h("th", {}, "Step"), h("th", {}, "Run"), h("th", {}, "Baseline"), h("th", {}, "Spiked in"))),
          h("tbody", {}, ...a.spikes.slice(0, MAX_ROWS).map((s) => h("tr", {}, h("td", {}, String(s.step)), h("td", {}, fmtNum(s.run)), h("td", {}, fmtNum(s.baseline)), h("td", {}, s.spiked.join(", "))))),
        ),
      );
    }
    return out;
  }
}
