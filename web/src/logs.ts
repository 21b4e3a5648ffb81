// Live logs: timestamp, level, message, and an expandable data payload.

import { getJSON, runPath } from "./api";
import { countAnswer, FailureLine, h, text } from "./dom";
import { fmtTime } from "./format";
import { LOG_LEVEL_RANK } from "./format.gen";
import type { LogEntry, LogPage } from "./types";

const LEVELS = ["", ...Object.keys(LOG_LEVEL_RANK).map((l) => l.toUpperCase())];

export class LogsView {
  readonly el: HTMLElement;
  private list = h("div", { class: "logs", id: "logs" });
  private level = h("select", { "aria-label": "Minimum level" }, ...LEVELS.map((l) => h("option", { value: l }, l || "all levels")));
  private older = h("button", { class: "btn", hidden: "" }, "Older");
  private empty = h("div", { class: "logs-empty muted", id: "logs-empty", hidden: "" });
  private failure = new FailureLine("logs-error", "The log lines could not be read.");
  private cursor: string | null = null;
  private seen = new Set<number>();
  // which load() is current: an answer to an older one (another level) is dropped
  private generation = 0;

  constructor(private readonly runId: string) {
    this.el = h(
      "section",
      { class: "card", id: "live-logs" },
      h("div", { class: "card-head" }, h("h3", {}, "Live logs"), this.level),
      this.failure.el,
      this.list,
      this.empty,
      this.older,
    );
    this.level.addEventListener("change", () => void this.load());
    this.older.addEventListener("click", () => void this.loadOlder());
  }

  async load(): Promise<void> {
    const gen = ++this.generation;
    this.list.replaceChildren();
    this.seen.clear();
    const page = await this.read(gen, null);
    if (!page) return;
    // the API pages newest first; show oldest at the top, before the lines the stream
    // appended while this page travelled (newer, or already in it: each shown once)
    this.list.prepend(...[...page.logs].reverse().filter((e) => !this.seen.has(e.seq)).map((e) => this.entry(e)));
    this.cursor = page.next_cursor;
    this.older.hidden = !this.cursor;
    this.showEmpty();
    this.list.scrollTop = this.list.scrollHeight;
  }

  /** With no line to show, say so, and what writes log lines (the level filter may hide some). */
  private showEmpty(): void {
    const none = this.list.childElementCount === 0;
    this.empty.hidden = !none;
    this.list.hidden = none;
    if (!none) return;
    const level = this.level.value;
    if (level) {
      this.empty.replaceChildren(
        h("p", {}, `No log lines at ${level} or above yet.`),
        h("p", { class: "small" }, "Choose “all levels” to see the lower ones."),
      );
      return;
    }
    this.empty.replaceChildren(
      h("p", {}, "No log lines yet."),
      h(
        "p",
        { class: "small" },
        "They show here as the run writes them: ",
        h("code", {}, "run.log_text(\"message\")"),
        ", Python logging through ",
        h("code", {}, "run.logging_handler()"),
        ", and an error that ends the training loop (all in the run folder's ",
        h("code", {}, "logs.jsonl"),
        "). The built-in recipes log their progress there.",
      ),
    );
  }

  private async loadOlder(): Promise<void> {
    if (!this.cursor) return;
    const gen = this.generation;
    const page = await this.read(gen, this.cursor);
    if (!page) return;
    for (const e of page.logs) if (!this.seen.has(e.seq)) this.list.insertBefore(this.entry(e), this.list.firstChild);
    this.cursor = page.next_cursor;
    this.older.hidden = !this.cursor;
  }

  /** A page of lines from `cursor` at the level chosen; null when it failed (said in the
   * card) or another level was chosen meanwhile. */
  private async read(gen: number, cursor: string | null): Promise<LogPage | null> {
    let page: LogPage;
    try {
      page = await getJSON<LogPage>(`${runPath(this.runId)}/logs`, { level: this.level.value, limit: 200, cursor });
    } catch (e) {
      if (gen === this.generation) this.failure.show(e);
      return null;
    }
    countAnswer(this.el);
    if (gen !== this.generation) return null;
    this.failure.clear();
    return page;
  }

  append(e: LogEntry): void {
    if (this.seen.has(e.seq)) return;
    const min = LOG_LEVEL_RANK[this.level.value.toLowerCase()] ?? 0;
    if ((LOG_LEVEL_RANK[e.level.toLowerCase()] ?? 20) < min) return;
    const stick = this.list.scrollTop + this.list.clientHeight >= this.list.scrollHeight - 8;
    this.list.appendChild(this.entry(e));
    if (!this.empty.hidden) this.showEmpty();
    if (stick) this.list.scrollTop = this.list.scrollHeight;
  }

  private entry(e: LogEntry): HTMLElement {
    this.seen.add(e.seq);
    const row = h(
      "div",
      { class: `log-row level-${e.level.toLowerCase()}` },
      h("span", { class: "log-ts" }, fmtTime(e.ts)),
      h("span", { class: "log-level" }, e.level),
      h("span", { class: "log-msg" }, e.message),
    );
    if (e.data !== null && e.data !== undefined) {
      return h("details", { class: "log-entry" }, h("summary", {}, row), h("pre", { class: "log-data" }, text(e.data)));
    }
    return h("div", { class: "log-entry" }, row);
  }
}
