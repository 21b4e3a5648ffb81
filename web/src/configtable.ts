// The settings of compared runs side by side: a row per setting (the run's own fields,
// then its config flattened to dotted keys), a column per run. A row whose values differ
// between the runs has class `diff`; "Only differences" hides the others. A row writes its
// numbers in one notation. A cell cuts a long value short (compare.css), so each holds its
// whole value in its tooltip. A run whose settings could not be read is named in the card's
// failure line (the compare view reads them again).

import { FailureLine, h } from "./dom";
import type { RunDetail, RunSummary } from "./types";

const FIELDS: [string, (r: RunSummary) => string | null][] = [
  ["project", (r) => r.project],
  ["group", (r) => r.group],
  ["tags", (r) => (r.tags.length ? r.tags.join(", ") : null)],
  ["method", (r) => r.method],
  ["base model", (r) => r.base_model],
  ["dataset", (r) => r.dataset],
  ["trainer", (r) => r.trainer],
  ["backend", (r) => r.backend],
];

/** A config as dotted keys and their values, in the order they were written. */
function flatten(value: unknown, prefix = "", out = new Map<string, unknown>()): Map<string, unknown> {
  if (value !== null && typeof value === "object" && !Array.isArray(value) && Object.keys(value).length) {
    for (const [k, v] of Object.entries(value)) flatten(v, prefix ? `${prefix}.${k}` : k, out);
  } else if (prefix) {
    out.set(prefix, value);
  }
  return out;
}

const plainNumber = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);

/**
 * A row's values as text (undefined where a run has none): a string as it is, anything else
 * as JSON, except that a row's numbers share one notation. JavaScript writes 1e-6 as
 * 0.000001 but 5e-7 as 5e-7: where a row's numbers would mix the two, each is written with
 * an exponent (1e-6, 5e-7), as short as still reads back the same number.
 */
function rowText(values: unknown[]): (string | undefined)[] {
  const written = values.filter(plainNumber).map(String);
  const exponent = written.some((w) => w.includes("e")) && written.some((w) => !w.includes("e"));
  return values.map((v) => {
    if (v === undefined) return undefined;
    if (typeof v === "string") return v;
    return exponent && plainNumber(v) ? v.toExponential() : JSON.stringify(v);
  });
}

export class ConfigTable {
  readonly el: HTMLElement;
  private table = h("table", { class: "table config-table", id: "compare-config" });
  private count = h("span", { class: "muted", id: "compare-config-count" });
  private onlyDiff: HTMLInputElement;
  readonly failure = new FailureLine("compare-config-error", "Some runs' settings could not be read.");
  /** The names of the runs left out of the table: their settings could not be read. */
  unread: string[] = [];

  constructor(onlyDiff: boolean, onToggle: (onlyDiff: boolean) => void) {
    this.onlyDiff = h("input", { type: "checkbox", id: "compare-only-diff" });
    this.onlyDiff.checked = onlyDiff;
    this.onlyDiff.addEventListener("change", () => {
      this.table.classList.toggle("only-diff", this.onlyDiff.checked);
      onToggle(this.onlyDiff.checked);
    });
    this.table.classList.toggle("only-diff", onlyDiff);
    this.el = h(
      "section",
      { class: "card", id: "compare-settings" },
      h("div", { class: "card-head" }, h("h3", {}, "Settings"), this.count, h("label", { class: "smoothing" }, this.onlyDiff, "Only differences")),
      this.failure.el,
      h("div", { class: "table-wrap" }, this.table),
    );
  }

  /** The settings of `runs` side by side; `unread` names the runs left out (see `failure`). */
  show(runs: RunDetail[], unread: string[] = []): void {
    this.unread = unread;
    const values = runs.map((d) => {
      const m = new Map<string, unknown>();
      for (const [name, get] of FIELDS) {
        const v = get(d.run);
        if (v !== null && v !== "") m.set(name, v);
      }
      return flatten(d.settings.config, "", m);
    });
    const names: string[] = [];
    const seen = new Set<string>();
    for (const m of values) {
      for (const k of m.keys()) {
        if (!seen.has(k)) {
          seen.add(k);
          names.push(k);
        }
      }
    }
    let differ = 0;
    const rows = names.map((name) => {
      const cells = rowText(values.map((m) => m.get(name)));
      const diff = new Set(cells.map((c) => c ?? "\u0000missing")).size > 1;
      if (diff) differ += 1;
      return h(
        "tr",
        { "data-key": name, ...(diff ? { class: "diff" } : {}) },
        h("td", { class: "mono", title: name }, name),
        ...cells.map((c) => h("td", { title: c ?? "not set" }, c ?? "—")),
      );
    });
    this.table.replaceChildren(
      h("thead", {}, h("tr", {}, h("th", {}, "Setting"), ...runs.map((d) => h("th", { title: d.name }, d.name)))),
      h("tbody", {}, ...rows),
    );
    this.count.textContent = `${differ} of ${names.length} differ`;
  }
}
