// The numbers behind a chart, apart from drawing: smoothing and which lines it applies to,
// the tokens axis, axis ticks and labels, and searches over a line's x values.

/** A line with fewer points than this is drawn as logged, never smoothed. */
export const MIN_SMOOTH_POINTS = 10;

/** The tokens trained up to each step (ascending steps), for the tokens x axis. */
export interface TokenAxis {
  steps: number[];
  total: number[];
}

export const finite = (v: number | null | undefined): number | null => (typeof v === "number" && Number.isFinite(v) ? v : null);

/** TensorBoard-style debiased exponential moving average; nulls pass through. */
export function ema(values: (number | null)[], weight: number): (number | null)[] {
  const out: (number | null)[] = new Array(values.length);
  let last = 0;
  let n = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v === null || !Number.isFinite(v)) {
      out[i] = null;
      continue;
    }
    last = last * weight + (1 - weight) * v;
    n += 1;
    out[i] = weight === 0 ? v : last / (1 - Math.pow(weight, n));
  }
  return out;
}

export function medianGap(step: number[]): number {
  if (step.length < 2) return Infinity;
  // a typed array sorts numbers without a compare function (several times faster)
  const gaps = new Float64Array(step.length - 1);
  for (let i = 1; i < step.length; i++) gaps[i - 1] = step[i] - step[i - 1];
  gaps.sort();
  return gaps[Math.floor(gaps.length / 2)];
}

function sameNumbers(a: number[], b: number[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * Which lines of a chart smoothing applies to. An EMA is a trade of each point's own value
 * for its neighbours': a fair trade on a dense, noisy line, a false one on a sparse line
 * (validation every few hundred steps), whose few points are each a measurement in their own
 * right and whose last value the EMA would drag towards the first. So a line is smoothed only
 * when it has at least MIN_SMOOTH_POINTS points and they are about as dense (median step gap
 * at most twice) as the densest line's of the chart; every other line is drawn as logged.
 */
export function smoothedLines(steps: number[][]): boolean[] {
  // the lines of a chart of several runs mostly share their steps (the server cuts every
  // run's series at the same edges): each different steps' median is worked out once
  const gaps: number[] = [];
  steps.forEach((s, i) => {
    const j = steps.findIndex((t) => sameNumbers(s, t)); // i at the latest
    gaps.push(j < i ? gaps[j] : medianGap(s));
  });
  const densest = Math.min(...gaps);
  return steps.map((s, i) => s.length >= MIN_SMOOTH_POINTS && gaps[i] <= 2 * densest);
}

/** The tokens trained up to `step`: exact at a logged step, interpolated between. */
export function tokensAt(axis: TokenAxis, step: number): number | null {
  const { steps, total } = axis;
  if (!steps.length) return null;
  let lo = 0;
  let hi = steps.length - 1;
  if (step <= steps[0]) return total[0];
  if (step >= steps[hi]) return total[hi];
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (steps[mid] <= step) lo = mid;
    else hi = mid;
  }
  const f = (step - steps[lo]) / (steps[hi] - steps[lo]);
  return total[lo] + f * (total[hi] - total[lo]);
}

/**
 * The labels of an axis's ascending ticks ("" for null, a tick uPlot leaves unlabelled):
 * each in the fewest digits that say it to a thousandth of the ticks' spacing, so that
 * no two read alike (1.5e-4 between 1e-4 and 2e-4, not a second 1e-4 or 2e-4).
 */
export function axisLabels(ticks: (number | null)[]): string[] {
  let gap = Infinity;
  let last: number | null = null;
  for (const v of ticks) {
    if (v === null) continue;
    if (last !== null && v > last) gap = Math.min(gap, v - last);
    last = v;
  }
  const spacing = Number.isFinite(gap) ? gap : 0;
  return ticks.map((v) => (v === null ? "" : axisNumber(v, spacing / 1000)));
}

/** `v` in the fewest significant digits that keep it within `tol` (and float noise) of
 * itself; in exponent form below 1e-3 and from 1e5 on. */
export function axisNumber(v: number, tol = 0): string {
  const a = Math.abs(v);
  const exp = a !== 0 && (a < 1e-3 || a >= 1e5);
  const near = Math.max(tol, a * 1e-12);
  for (let digits = 1; digits <= 17; digits++) {
    const s = exp ? v.toExponential(digits - 1) : String(Number(v.toPrecision(digits)));
    if (Math.abs(Number(s) - v) <= near) return s;
  }
  return String(v);
}

/** A duration in seconds as the relative-time axis shows it: 45s, 12m, 12m 05s, 3h 07m. */
export function duration(seconds: number): string {
  const s = Math.round(seconds);
  const sign = s < 0 ? "-" : "";
  const a = Math.abs(s);
  if (a < 60) return `${sign}${a}s`;
  if (a < 3600) return `${sign}${Math.floor(a / 60)}m` + (a % 60 ? ` ${String(a % 60).padStart(2, "0")}s` : "");
  const m = Math.floor((a % 3600) / 60);
  return `${sign}${Math.floor(a / 3600)}h` + (m ? ` ${String(m).padStart(2, "0")}m` : "");
}

// Tick steps of the relative-time axis: whole seconds, minutes and hours, not 100 s.
const DURATION_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];

/** The tick step for a relative-time axis spanning `span` seconds: about six ticks. */
export function durationInterval(span: number): number {
  const want = span / 6;
  return DURATION_STEPS.find((s) => s >= want) ?? Math.ceil(want / 86400) * 86400;
}

export function compact(v: number): string {
  const a = Math.abs(v);
  if (a >= 1e9) return `${Number((v / 1e9).toPrecision(3))}G`;
  if (a >= 1e6) return `${Number((v / 1e6).toPrecision(3))}M`;
  if (a >= 1e3) return `${Number((v / 1e3).toPrecision(3))}k`;
  return String(Math.round(v));
}

/** The index of the value nearest `x` in ascending `xs` (-1 when empty). */
export function nearest(xs: ArrayLike<number>, x: number): number {
  let lo = 0;
  let hi = xs.length - 1;
  if (hi < 0) return -1;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (xs[mid] <= x) lo = mid;
    else hi = mid;
  }
  return Math.abs(xs[hi] - x) < Math.abs(xs[lo] - x) ? hi : lo;
}

export function ascending(xs: number[]): boolean {
  for (let i = 1; i < xs.length; i++) if (!(xs[i] > xs[i - 1])) return false;
  return true;
}

/** The ticks of an axis from `min` to `max`: both ends (as a chart's min and max labels)
 * and the multiples of `incr` between that keep clear of them. */
export function endTicks(min: number, max: number, incr: number): number[] {
  const out = [min];
  // past 2**53 a step smaller than a float's spacing there adds nothing: the loop stops
  for (let v = Math.ceil(min / incr) * incr; v < max && v + incr > v; v += incr) {
    const t = Number(v.toPrecision(12));
    if (t - min >= 0.75 * incr && max - t >= 0.75 * incr) out.push(t);
  }
  if (max > min) out.push(max);
  return out;
}
