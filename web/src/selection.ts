// The runs ticked for comparing, shared by the sidebar list and the run table; their
// order is the order they were ticked, which is the compare view's order.

import { getJSON } from "./api";
import { h } from "./dom";
import type { RunList, RunSummary } from "./types";

export class Selection {
  private ids: string[] = [];
  private listeners = new Set<() => void>();

  get list(): string[] {
    return this.ids.slice();
  }

  get size(): number {
    return this.ids.length;
  }

  has(runId: string): boolean {
    return this.ids.includes(runId);
  }

  toggle(runId: string, on = !this.has(runId)): void {
    if (on === this.has(runId)) return;
    this.ids = on ? [...this.ids, runId] : this.ids.filter((id) => id !== runId);
    this.changed();
  }

  /** Tick every run of `runIds` (those already ticked keep their place). */
  add(runIds: string[]): void {
    const fresh = runIds.filter((id) => !this.has(id));
    if (!fresh.length) return;
    this.ids = [...this.ids, ...fresh];
    this.changed();
  }

  set(runIds: string[]): void {
    const next = [...new Set(runIds)];
    if (next.join("\n") === this.ids.join("\n")) return;
    this.ids = next;
    this.changed();
  }

  onChange(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  private changed(): void {
    for (const fn of this.listeners) fn();
  }
}

const GROUP_PAGE = 500;

/** Every run of a group (a sweep's arms share one), newest first, in `project` when
 * given: all pages, not only those a list has loaded. */
export async function groupRuns(group: string, project: string | null): Promise<RunSummary[]> {
  const out: RunSummary[] = [];
  let cursor: string | null = null;
  do {
    const page: RunList = await getJSON<RunList>("/runs", { group, project, limit: GROUP_PAGE, cursor });
    out.push(...page.runs);
    cursor = page.next_cursor;
  } while (cursor);
  return out;
}

/** A run's group as a button that ticks every run of the group (in `project` when given). */
export function groupButton(group: string, project: () => string | null, selection: Selection): HTMLButtonElement {
  const b = h("button", { class: "run-group", title: `Select every run of group ${group}`, "data-group": group }, group);
  b.addEventListener("click", (e) => {
    e.stopPropagation();
    void groupRuns(group, project()).then((runs) => selection.add(runs.map((r) => r.run_id)));
  });
  return b;
}
