// Colours for code that draws (charts, canvases): read from the CSS variables in style.css, so whatever
// draws follows the light/dark setting the same way the page does.

// The variables' values by theme: they change only with it (style.css sets them on :root for
// light and dark), and reading one computes the page's style anew wherever the DOM changed
// since the last read (each chart drawn read a dozen, between its own DOM changes).
const VALUES = { light: new Map<string, string>(), dark: new Map<string, string>() };

/** The value of a CSS variable on the document root, e.g. cssVar("--text") → "#1f2430" ("" when unset). */
export function cssVar(name: string): string {
  const key = name.startsWith("--") ? name : `--${name}`;
  const values = VALUES[isDark() ? "dark" : "light"];
  let value = values.get(key);
  if (value === undefined) {
    value = getComputedStyle(document.documentElement).getPropertyValue(key).trim();
    values.set(key, value);
  }
  return value;
}

export interface ChartTheme {
  /** Legend, title and tooltip text. */
  text: string;
  /** Axis lines, ticks and tick labels. */
  axis: string;
  /** Split (grid) lines. */
  grid: string;
  /** The chart's background (the card it sits on). */
  bg: string;
}

/** The colours a chart draws with now; call again after onThemeChange fires. */
export function chartTheme(): ChartTheme {
  return {
    text: cssVar("--text") || "#1f2430",
    axis: cssVar("--chart-axis") || "#6b7280",
    grid: cssVar("--chart-grid") || "#e5e7eb",
    bg: cssVar("--card") || "#fff",
  };
}

/** True while the system setting asks for dark. */
export function isDark(): boolean {
  return window.matchMedia?.("(prefers-color-scheme: dark)").matches ?? false;
}

/** Calls `fn` whenever the system switches between light and dark; returns a function that stops it. */
export function onThemeChange(fn: () => void): () => void {
  const mq = window.matchMedia?.("(prefers-color-scheme: dark)");
  if (!mq) return () => undefined;
  mq.addEventListener("change", fn);
  return () => mq.removeEventListener("change", fn);
}
