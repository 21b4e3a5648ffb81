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

/**
 * `colour` (#rgb, #rrggbb or rgb(…)) with its HSL lightness moved by `dl` (−1 to 1, held
 * within 0–1), as rgb(…): a shade of the same hue and saturation. A colour it cannot read
 * comes back as it is.
 */
export function withLightness(colour: string, dl: number): string {
  const rgb = parseColour(colour);
  if (!rgb) return colour;
  const [r, g, b] = rgb.map((v) => v / 255);
  const max = Math.max(r, g, b);
  const min = Math.min(r, g, b);
  const l = (max + min) / 2;
  const d = max - min;
  const s = d === 0 ? 0 : d / (1 - Math.abs(2 * l - 1));
  let hue = 0;
  if (d !== 0) {
    if (max === r) hue = ((g - b) / d + 6) % 6;
    else if (max === g) hue = (b - r) / d + 2;
    else hue = (r - g) / d + 4;
  }
  const l2 = Math.min(1, Math.max(0, l + dl));
  const c = (1 - Math.abs(2 * l2 - 1)) * s;
  const x = c * (1 - Math.abs((hue % 2) - 1));
  const m = l2 - c / 2;
  const [r2, g2, b2] = [[c, x, 0], [x, c, 0], [0, c, x], [0, x, c], [x, 0, c], [c, 0, x]][Math.floor(hue) % 6];
  return `rgb(${[r2, g2, b2].map((v) => Math.round((v + m) * 255)).join(", ")})`;
}

function parseColour(colour: string): number[] | null {
  const hex = colour.trim().match(/^#([0-9a-f]{3}|[0-9a-f]{6})$/i);
  if (hex) {
    const digits = hex[1].length === 3 ? [...hex[1]].map((c) => c + c) : hex[1].match(/../g) ?? [];
    return digits.map((p) => parseInt(p, 16));
  }
  const fn = colour.match(/^rgba?\(\s*([\d.]+)[\s,]+([\d.]+)[\s,]+([\d.]+)/i);
  return fn ? [Number(fn[1]), Number(fn[2]), Number(fn[3])] : null;
}
