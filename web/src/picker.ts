// The metric picker: every key the run logged, searchable, grouped by namespace (the part
// of the key before its first '/'); picking a key adds a chart of it.

import { h } from "./dom";

export const TOP_LEVEL = "(no namespace)";

export interface PickerKey {
  key: string;
  count: number | null; // points logged; null for a key first seen live
  canonical: string | null;
}

/** A key's namespace: what comes before its first '/', or TOP_LEVEL. */
export function namespaceOf(key: string): string {
  const i = key.indexOf("/");
  return i > 0 ? key.slice(0, i) : TOP_LEVEL;
}

/** Whether every word of `query` occurs in the key or its canonical name (any case). */
export function matches(k: PickerKey, query: string): boolean {
  const hay = `${k.key} ${k.canonical ?? ""}`.toLowerCase();
  return query.toLowerCase().split(/\s+/).filter(Boolean).every((w) => hay.includes(w));
}

export class MetricPicker {
  readonly el: HTMLElement;
  private readonly search: HTMLInputElement;
  private readonly list = h("div", { class: "picker-list" });
  private keys: PickerKey[] = [];
  private shown = new Set<string>();

  constructor(
    private readonly onPick: (key: string) => void,
    onDefaults: () => void,
  ) {
    this.search = h("input", { type: "search", id: "chart-picker-search", placeholder: "Search metrics", "aria-label": "Search metrics", autocomplete: "off" });
    this.search.addEventListener("input", () => this.draw());
    this.search.addEventListener("keydown", (e) => {
      if (e.key === "Enter") {
        const first = this.list.querySelector<HTMLButtonElement>("button.picker-key:not([disabled])");
        first?.click();
      } else if (e.key === "Escape") {
        this.close();
      }
    });
    const defaults = h("button", { type: "button", id: "chart-picker-defaults", class: "link-button" }, "Default charts");
    defaults.addEventListener("click", onDefaults);
    const done = h("button", { type: "button", class: "link-button" }, "Close");
    done.addEventListener("click", () => this.close());
    this.el = h(
      "div",
      { class: "chart-picker", id: "chart-picker", hidden: "" },
      h("div", { class: "picker-head" }, this.search, defaults, done),
      this.list,
    );
  }

  get isOpen(): boolean {
    return !this.el.hidden;
  }

  open(): void {
    this.el.hidden = false;
    this.draw();
    this.search.focus();
  }

  close(): void {
    this.el.hidden = true;
  }

  /** The run's keys, and those a chart already shows (listed, not pickable again). */
  setKeys(keys: PickerKey[], shown: Set<string>): void {
    // sorted when drawn: a closed picker costs nothing (a first localeCompare can take 0.1 s)
    this.keys = keys;
    this.shown = shown;
    if (this.isOpen) this.draw();
  }

  private draw(): void {
    const query = this.search.value.trim();
    const groups = new Map<string, PickerKey[]>();
    for (const k of [...this.keys].sort((a, b) => a.key.localeCompare(b.key))) {
      if (!matches(k, query)) continue;
      const ns = namespaceOf(k.key);
      const list = groups.get(ns) ?? [];
      list.push(k);
      groups.set(ns, list);
    }
    const names = [...groups.keys()].sort((a, b) => (a === TOP_LEVEL ? -1 : b === TOP_LEVEL ? 1 : a.localeCompare(b)));
    if (!names.length) {
      this.list.replaceChildren(h("p", { class: "muted" }, query ? `No metric matches "${query}".` : "No metrics logged yet."));
      return;
    }
    this.list.replaceChildren(
      ...names.map((ns) => {
        const items = groups.get(ns) ?? [];
        return h(
          "div",
          { class: "picker-group", "data-namespace": ns },
          h("div", { class: "picker-ns" }, ns, " ", h("span", { class: "muted" }, `(${items.length})`)),
          ...items.map((k) => this.item(k)),
        );
      }),
    );
  }

  private item(k: PickerKey): HTMLElement {
    const on = this.shown.has(k.key);
    const attrs: Record<string, string> = { type: "button", class: "picker-key", "data-key": k.key, title: on ? "Already on a chart" : `Add a chart of ${k.key}` };
    if (on) attrs.disabled = "";
    const b = h(
      "button",
      attrs,
      h("span", { class: "picker-name" }, k.key),
      k.canonical && k.canonical !== k.key ? h("span", { class: "muted" }, ` = ${k.canonical}`) : null,
      h("span", { class: "muted picker-count" }, on ? "on a chart" : k.count === null ? "" : `${k.count} points`),
    );
    b.addEventListener("click", () => this.onPick(k.key));
    return b;
  }
}
