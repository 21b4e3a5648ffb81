// The Rollouts tab: pick a step and split, sort best/worst N by reward, and read
// prompts and completions. Model output is untrusted: it is only ever text.

import { getJSON, runPath } from "./api";
import { clear, h } from "./dom";
import { fmtNum } from "./format";
import type { Sample, SamplesResponse } from "./types";

/** Rollouts a page shows in "all, in order". */
const PAGE = 100;

/**
 * A rollout's number as the History and the charts' tooltips say it: "non-finite" where
 * the field was `logged` with no finite number (the index keeps a NaN or an infinity as
 * null, the field kept in the sample's data), "—" where it was not logged at all.
 */
function value(v: number | null | undefined, logged: boolean): string {
  return (v === null || v === undefined) && logged ? "non-finite" : fmtNum(v);
}

function messageText(v: unknown): string {
  if (typeof v === "string") return v;
  if (Array.isArray(v)) {
    return v
      .map((m) => {
        if (m && typeof m === "object" && "content" in m) {
          const msg = m as { role?: unknown; content?: unknown };
          return `[${String(msg.role ?? "message")}]\n${typeof msg.content === "string" ? msg.content : JSON.stringify(msg.content)}`;
        }
        return typeof m === "string" ? m : JSON.stringify(m);
      })
      .join("\n\n");
  }
  if (v === null || v === undefined) return "";
  return JSON.stringify(v, null, 2);
}

export class RolloutsView {
  readonly el: HTMLElement;
  private step = h("select", { id: "rollout-step", "aria-label": "Step" });
  private mode = h(
    "select",
    { id: "rollout-mode", "aria-label": "Order" },
    h("option", { value: "all" }, "all, in order"),
    h("option", { value: "best" }, "best N"),
    h("option", { value: "worst" }, "worst N"),
  );
  private n = h("input", { id: "rollout-n", type: "number", min: "1", max: "500", value: "5", "aria-label": "N" });
  /** N and its label: only best/worst N use it. */
  private nField = h("label", { class: "rollout-n", hidden: "" }, "N ", this.n);
  private list = h("div", { class: "rollouts", id: "rollouts" });
  private info = h("p", { class: "muted", id: "rollout-info" });
  private prev = h("button", { class: "btn", type: "button", id: "rollout-prev" }, "‹ Previous");
  private next = h("button", { class: "btn", type: "button", id: "rollout-next" }, "Next ›");
  private range = h("span", { class: "muted", id: "rollout-range" });
  private pager = h("div", { class: "pager rollout-pager", hidden: "" }, this.prev, this.range, this.next);
  /** The first rollout shown (in "all, in order"): the pager moves it a page at a time. */
  private offset = 0;
  private total = 0;
  private request = 0; // the latest samples request

  constructor(private readonly runId: string) {
    this.el = h(
      "section",
      { class: "card" },
      h("div", { class: "card-head" }, h("h3", {}, "Rollouts"), h("div", { class: "controls" }, "Step ", this.step, " ", this.mode, " ", this.nField)),
      this.info,
      this.list,
      this.pager,
    );
    for (const c of [this.step, this.mode, this.n]) {
      c.addEventListener("change", () => {
        this.offset = 0;
        void this.load();
      });
    }
    this.prev.addEventListener("click", () => void this.turn(-PAGE));
    this.next.addEventListener("click", () => void this.turn(PAGE));
  }

  private async turn(by: number): Promise<void> {
    this.offset = Math.max(0, Math.min(this.offset + by, Math.max(0, this.total - 1)));
    await this.load();
    this.el.scrollIntoView({ block: "start" });
  }

  async load(): Promise<void> {
    // a change made while an answer is on its way asks again: only the latest answer shows
    const request = ++this.request;
    const [step, split] = this.step.value ? this.step.value.split("|") : [null, null];
    const mode = this.mode.value;
    this.nField.hidden = mode === "all";
    const resp = await getJSON<SamplesResponse>(`${runPath(this.runId)}/samples`, {
      step,
      split,
      best: mode === "best" ? this.n.value : null,
      worst: mode === "worst" ? this.n.value : null,
      limit: mode === "all" ? PAGE : null,
      offset: mode === "all" && this.offset ? this.offset : null,
    });
    if (request !== this.request) return;
    if (!this.step.options.length || this.step.options.length !== resp.available.length) {
      clear(this.step);
      for (const a of resp.available) {
        this.step.appendChild(h("option", { value: `${a.step}|${a.split}` }, `step ${a.step} · ${a.split} (${a.count})`));
      }
    }
    if (resp.step !== null) this.step.value = `${resp.step}|${resp.split}`;
    clear(this.list);
    this.total = resp.total;
    if (!resp.available.length) {
      this.info.replaceChildren(
        "This run has kept no rollouts yet. They are the prompts and completions a run records with ",
        h("code", {}, "run.log_samples(step, samples)"),
        "; the built-in recipes keep them when ",
        h("code", {}, "export_samples"),
        " is on (the default): GRPO at each step and validation, SFT and DPO at each validation.",
      );
      this.pager.hidden = true;
      return;
    }
    const first = mode === "all" ? this.offset : 0;
    const shown = resp.samples.length ? `rollouts ${first + 1}–${first + resp.samples.length}` : "no rollouts";
    this.info.textContent = `${shown} of ${resp.total} at step ${resp.step} (${resp.split})`;
    for (const s of resp.samples) this.list.appendChild(this.card(s));
    this.list.dataset.count = String(resp.samples.length);
    this.list.dataset.offset = String(first);
    // pages only in "all, in order": best/worst N show their N at once
    this.pager.hidden = mode !== "all" || resp.total <= PAGE;
    this.range.textContent = `${first + 1}–${first + resp.samples.length} of ${resp.total}`;
    this.prev.disabled = first === 0;
    this.next.disabled = first + resp.samples.length >= resp.total;
  }

  private card(s: Sample): HTMLElement {
    const terms = Object.entries(s.reward_terms ?? {});
    const facts: [string, string][] = [
      ["reward", value(s.reward, s.data.reward === null)],
      ["advantage", value(s.advantage, s.data.advantage === null)],
      ["group", s.group === null || s.group === undefined ? "—" : String(s.group)],
      ["truncated", s.truncated === null ? "—" : s.truncated ? "yes" : "no"],
      ...Object.entries(s.tokens ?? {}).map(([k, v]): [string, string] => [k, value(v, v === null)]),
    ];
    const prompt = h("pre", { class: "prompt" });
    prompt.textContent = messageText(s.prompt);
    const completion = h("pre", { class: "completion" });
    completion.textContent = messageText(s.completion);
    return h(
      "article",
      { class: "rollout", "data-index": String(s.index) },
      h("div", { class: "facts" }, ...facts.map(([k, v]) => h("span", { class: "fact" }, h("b", {}, k), " ", v))),
      terms.length ? h("div", { class: "terms" }, h("b", {}, "reward terms "), ...terms.map(([k, v]) => h("span", { class: "term" }, `${k}: ${value(v, v === null)}`))) : null,
      h("div", { class: "io" }, h("div", {}, h("h5", {}, "Prompt"), prompt), h("div", {}, h("h5", {}, "Completion"), completion)),
    );
  }
}
