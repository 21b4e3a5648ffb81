// The first script's part of a comparison: on a /compare URL it asks for the runs' overlay
// at once, while the app's chunk (app.ts) is fetched, compiled and run; the compare view
// takes that answer where it asks for the same (takeEarlyOverlay), else asks again. Asked
// from the app, the request left 0.1-0.3 s after the script arrived (load 3-4).

import { chartSelectors, getOverlay, overlayPath, type KeySelectors } from "./api";
import { CHARTS } from "./chartspecs";
import type { Overlay } from "./types";

// A chart cannot show more distinct points than it is pixels wide; the server never
// sends more than this per series.
export const MAX_POINTS = 1000;
const MIN_POINTS = 300;
// series (runs × keys) per request: the server's most
export const MAX_SERIES = 400;
// The keys a prefix selector is counted as picking in a run (the recipes log four under
// timing/): how many it picks is only known once the run's keys are read.
const PREFIX_KEYS = 8;
// the run list's column (style.css .layout): the compare view has the rest of the width
const LIST_WIDTH = 320;

/** Points per series for a plot `width` pixels wide: about one per pixel. */
export function pointBudget(width: number): number {
  return Math.max(MIN_POINTS, Math.min(MAX_POINTS, Math.round(width)));
}

export interface CompareState {
  runs: string[];
  /** Keys charted besides the standard charts: one chart each, a line per run. */
  keys: string[];
  baseline: string | null;
  subject: string | null;
  acrossPlans: boolean;
  onlyDiff: boolean;
}

export function readCompareState(p: URLSearchParams): CompareState {
  return {
    runs: [...new Set(p.getAll("run").filter(Boolean))],
    keys: [...new Set(p.getAll("key").filter(Boolean))],
    baseline: p.get("baseline"),
    subject: p.get("subject"),
    acrossPlans: p.get("across_plans") === "1",
    onlyDiff: p.get("only_diff") === "1",
  };
}

/**
 * What a comparison's overlay asks for with the runs: the standard charts' and the added
 * keys' selectors where the series they can pick fit one request, else none (each run's
 * list fields and keys alone; the charts' series then come from /api/series in groups).
 * Each role, name and key selector picks at most one key a run; a prefix is counted as
 * PREFIX_KEYS. Asked past the server's limit, the overlay is refused with a 400, which the
 * browser logs as a failed request.
 */
export function compareSelectors(state: CompareState): KeySelectors {
  const select = chartSelectors(CHARTS, state.keys);
  const perRun = (select.roles?.length ?? 0) + (select.names?.length ?? 0) + (select.keys?.length ?? 0) + (select.prefixes?.length ?? 0) * PREFIX_KEYS;
  return state.runs.length * perRun > MAX_SERIES ? {} : select;
}

let early: { path: string; answer: Promise<Overlay> } | null = null;

/** On a comparison's URL, ask for its overlay as the compare view will (same runs, keys
 * and points: half the width beside the run list, as the view measures it). */
export function askEarly(): void {
  const u = new URL(window.location.href);
  if (!u.pathname.startsWith("/compare")) return;
  const state = readCompareState(u.searchParams);
  if (!state.runs.length) return;
  const select = compareSelectors(state);
  const opts = { points: pointBudget((document.documentElement.clientWidth - LIST_WIDTH) / 2), bands: false };
  const answer = getOverlay(state.runs, select, opts);
  answer.catch(() => undefined); // a refusal is the view's to handle, once it takes it
  early = { path: overlayPath(state.runs, select, opts), answer };
}

/** The early answer (once) where it was asked at `path`; null otherwise. */
export function takeEarlyOverlay(path: string): Promise<Overlay> | null {
  const taken = early;
  early = null;
  return taken && taken.path === path ? taken.answer : null;
}
