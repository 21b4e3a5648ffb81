// Keyboard navigation of a list of runs: j and k move the cursor row down and up, x ticks
// it for comparing, Enter opens it, / focuses the search box (Escape leaves it). Keys
// typed into an input, a select or a text area are the input's own.

/** What the keys act on: the page in view's rows, search box and actions. */
export interface KeyTarget {
  rows(): HTMLElement[];
  search(): HTMLInputElement | null;
  open(row: HTMLElement): void;
  toggle(row: HTMLElement): void;
}

const CURSOR = "cursor";

const NOT_TYPED = ["checkbox", "radio", "button", "submit", "reset", "range"];

function typing(el: EventTarget | null): boolean {
  if (el instanceof HTMLInputElement) return !NOT_TYPED.includes(el.type);
  return el instanceof HTMLElement && (el.isContentEditable || el.tagName === "SELECT" || el.tagName === "TEXTAREA");
}

/** Listen on the document; `target()` is asked at each key (null: nothing to navigate). */
export function installListKeys(target: () => KeyTarget | null): () => void {
  const onKey = (e: KeyboardEvent) => {
    if (e.ctrlKey || e.metaKey || e.altKey || e.defaultPrevented) return;
    const t = target();
    if (!t) return;
    const search = t.search();
    if (typing(e.target)) {
      if (e.key === "Escape" && search && e.target === search) search.blur();
      return;
    }
    const rows = t.rows();
    const current = rows.findIndex((r) => r.classList.contains(CURSOR));
    if (e.key === "/" && search) {
      e.preventDefault();
      search.focus();
      search.select();
    } else if ((e.key === "j" || e.key === "k") && rows.length) {
      e.preventDefault();
      const start = current >= 0 ? current : rows.findIndex((r) => r.classList.contains("selected"));
      const next = start < 0 ? 0 : Math.min(rows.length - 1, Math.max(0, start + (e.key === "j" ? 1 : -1)));
      moveCursor(rows, rows[next]);
    } else if (e.key === "x" && current >= 0) {
      e.preventDefault();
      t.toggle(rows[current]);
    } else if (e.key === "Enter" && current >= 0) {
      // a focused button, link or row does its own Enter
      if (e.target instanceof HTMLElement && e.target !== document.body && e.target.closest("button, a, [role=button]")) return;
      e.preventDefault();
      t.open(rows[current]);
    }
  };
  document.addEventListener("keydown", onKey);
  return () => document.removeEventListener("keydown", onKey);
}

/** Where the cursor is among `container`'s rows, to put it back once they are drawn again. */
export interface SavedCursor {
  run: string;
  focused: boolean;
}

export function saveCursor(container: HTMLElement): SavedCursor | null {
  const row = container.querySelector<HTMLElement>(`.${CURSOR}`);
  return row?.dataset.run ? { run: row.dataset.run, focused: row.contains(document.activeElement) } : null;
}

export function restoreCursor(container: HTMLElement, saved: SavedCursor | null): void {
  if (!saved) return;
  const row = Array.from(container.children).find((r) => (r as HTMLElement).dataset.run === saved.run) as HTMLElement | undefined;
  if (!row) return;
  row.classList.add(CURSOR);
  row.setAttribute("aria-current", "true");
  if (saved.focused) row.focus();
}

function moveCursor(rows: HTMLElement[], to: HTMLElement): void {
  for (const r of rows) {
    r.classList.remove(CURSOR);
    r.removeAttribute("aria-current");
  }
  to.classList.add(CURSOR);
  to.setAttribute("aria-current", "true");
  // focus shows where the cursor is and scrolls it into view; the row opens on Enter
  to.focus();
}
