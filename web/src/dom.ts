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
