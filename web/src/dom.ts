// DOM helpers. Text is only ever set through text nodes: no innerHTML anywhere.

type Child = Node | string | number | null | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string> = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") el.className = v;
    else el.setAttribute(k, v);
  }
  append(el, ...children);
  return el;
}

export function append(el: Node, ...children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
  }
}

export function clear(el: Element): void {
  el.replaceChildren();
}

/** Attributes that say what an element stands for: listeners close over it, so an element
 * whose identity differs is replaced, never patched. */
const IDENTITY = ["data-run", "data-group", "data-worker"];

function sameNode(a: Element, b: Element): boolean {
  return a.tagName === b.tagName && IDENTITY.every((k) => a.getAttribute(k) === b.getAttribute(k));
}

/**
 * Make `el` look as `fresh` does, keeping every node that can stay (same tag and identity)
 * and changing only the attributes and text that differ; returns the element shown. A row
 * patched this way keeps the node under the pointer: a row replaced between a press and
 * its release loses the click (the browser sends it to the two nodes' common ancestor,
 * which no row's listener hears). `el`'s listeners stay; `fresh`'s come along only on the
 * nodes moved over from it, so a listener must read what may change when it runs.
 */
export function morph(el: Element, fresh: Element): Element {
  if (!sameNode(el, fresh)) {
    el.replaceWith(fresh);
    return fresh;
  }
  for (const a of Array.from(el.attributes)) if (!fresh.hasAttribute(a.name)) el.removeAttribute(a.name);
  for (const a of Array.from(fresh.attributes)) if (el.getAttribute(a.name) !== a.value) el.setAttribute(a.name, a.value);
  if (el instanceof HTMLInputElement && fresh instanceof HTMLInputElement) el.checked = fresh.checked;
  const olds = Array.from(el.childNodes);
  const news = Array.from(fresh.childNodes);
  news.forEach((n, i) => {
    const o = olds[i];
    if (o === undefined) el.appendChild(n);
    else if (o instanceof Element && n instanceof Element) morph(o, n);
    else if (o.nodeType === Node.TEXT_NODE && n.nodeType === Node.TEXT_NODE) {
      if (o.nodeValue !== n.nodeValue) o.nodeValue = n.nodeValue;
    } else o.replaceWith(n);
  });
  for (const o of olds.slice(news.length)) o.remove();
  return el;
}

/**
 * Show `rows` (new elements, each naming what it shows in `data-<key>`: a run, a worker) in
 * `container` in that order: the row of one already shown is patched in place (`morph`),
 * rows that keep their place are not moved, and the rest are removed. Returns the elements
 * shown, in order.
 */
export function reconcile(container: Element, rows: HTMLElement[], key = "run"): HTMLElement[] {
  const shownBefore = new Map<string, HTMLElement>();
  for (const c of Array.from(container.children) as HTMLElement[]) {
    const id = c.dataset[key];
    if (id) shownBefore.set(id, c);
  }
  const shown = rows.map((fresh) => {
    const id = fresh.dataset[key] ?? "";
    const old = shownBefore.get(id);
    shownBefore.delete(id);
    return old ? (morph(old, fresh) as HTMLElement) : fresh;
  });
  shown.forEach((el, i) => {
    const at = container.children[i];
    if (at !== el) container.insertBefore(el, at ?? null);
  });
  while (container.children.length > shown.length) container.lastElementChild?.remove();
  return shown;
}

export function text(value: unknown): string {
  if (value === null || value === undefined) return "";
  if (typeof value === "string") return value;
  return JSON.stringify(value, null, 2);
}

/** Resolves once the browser has painted the page as it is now, or after `ms` where it
 * paints nothing (a hidden tab): the next animation frame runs before that frame's paint,
 * and a task it posts runs once the frame is done (a second animation frame would wait for
 * the frame after, up to a frame longer). */
export function painted(ms = 200): Promise<void> {
  return new Promise((resolve) => {
    const timer = window.setTimeout(resolve, ms);
    requestAnimationFrame(() => {
      const channel = new MessageChannel();
      channel.port1.onmessage = () => {
        window.clearTimeout(timer);
        channel.port1.close();
        resolve();
      };
      channel.port2.postMessage(null);
    });
  });
}

/** Performance marks of a page's first load, read by bench/bench_cold.py: the click (or
 * navigation) handled, the first answer parsed, the charts built, the charts painted (on
 * the compare page: the charts in the window, which are drawn first), and on the compare
 * page every chart drawn and painted (`all`). */
export const MARKS = {
  open: "runwatch:open",
  answered: "runwatch:answered",
  built: "runwatch:built",
  drawn: "runwatch:drawn",
  all: "runwatch:all-drawn",
} as const;

/** Count one more answered read on `el` (its `data-answers`), whether the view showed the
 * answer or dropped it as older than one shown: a test waits on the count. */
export function countAnswer(el: HTMLElement): void {
  el.dataset.answers = String(Number(el.dataset.answers ?? 0) + 1);
}

/** A line in a card that says a read failed (the server down) until a later one succeeds:
 * the card keeps what it showed, and the error is the page's to say, not an uncaught one. */
export class FailureLine {
  readonly el: HTMLElement;

  constructor(id: string, private readonly what: string) {
    this.el = h("p", { class: "error small", id, hidden: "" });
  }

  /** Say what failed (`what`, the line's own by default), the error `e`, and what happens
   * next (`next`, a sentence; none by default). */
  show(e: unknown, next = "", what = this.what): void {
    this.el.textContent = [what, e instanceof Error ? e.message : String(e), next].filter(Boolean).join(" ");
    this.el.hidden = false;
  }

  clear(): void {
    this.el.hidden = true;
  }
}
