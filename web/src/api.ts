// Thin typed client for the runwatch HTTP API; every error becomes an ApiError.

import type { ChartSpec } from "./chartspecs";
import type { Overlay } from "./types";

export type { Overlay } from "./types";

export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    /** The request field the error is about (a form shows the message next to it). */
    readonly field: string | null = null,
    /** The server's own words, before plainError rewrote them for the page. */
    readonly raw: string | null = null,
  ) {
    super(message);
  }
}

type Params = Record<string, string | number | null | undefined>;

export function query(params: Params): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== null && v !== undefined && v !== "") q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : "";
}

// --- Errors in plain words -------------------------------------------------------------
// The API speaks to programs: "bad request: devices: Input should be less than or equal to
// 1024", "…; GET /api/recipes lists its settings". The page says the same as a sentence a
// person acts on ("Devices must be at most 1024."), next to the field when it names one.

/** Labels of request fields as the forms name them; any other is its name in words. */
const FIELD_LABELS: Record<string, string> = {
  argv: "Command",
  cwd: "Working folder",
  device_profile: "Device profile",
  max_attempts: "Max attempts",
  startup_timeout_s: "Startup timeout",
};

function fieldLabel(path: string): string {
  if (FIELD_LABELS[path]) return FIELD_LABELS[path];
  const parts = path.split(".");
  if (parts[0] === "settings" && parts.length > 1) return `The setting ${parts.slice(1).join(".")}`;
  const words = parts
    .map((p) => (/^\d+$/.test(p) ? `(item ${Number(p) + 1})` : (FIELD_LABELS[p] ?? p.replace(/_/g, " "))))
    .join(" ");
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/** A validation message of the API's schema checks, as the end of a sentence after the field. */
const RULES: [RegExp, (m: RegExpMatchArray) => string][] = [
  [/^Input should be greater than or equal to (.+)$/, (m) => `must be at least ${m[1]}`],
  [/^Input should be less than or equal to (.+)$/, (m) => `must be at most ${m[1]}`],
  [/^Input should be greater than (.+)$/, (m) => `must be more than ${m[1]}`],
  [/^Input should be less than (.+)$/, (m) => `must be less than ${m[1]}`],
  [/^Input should be a valid integer/, () => "must be a whole number"],
  [/^Input should be a finite number/, () => "must be a number"],
  [/^Input should be a valid number/, () => "must be a number"],
  [/^Input should be a valid boolean/, () => "must be true or false"],
  [/^Input should be a valid string/, () => "must be text"],
  [/^Input should be a valid (list|array)/, () => "must be a list"],
  [/^Input should be a valid dictionary/, () => "must be a set of names and values"],
  [/^Input should be (.+)$/, (m) => `must be ${m[1]}`],
  [/^Field required$/, () => "is missing: fill it in"],
  [/^Extra inputs are not permitted$/, () => "is not accepted here: leave it out"],
  [/^String should have at least 1 character/, () => "must not be empty"],
  [/^String should have at most (\d+) characters?/, (m) => `must be at most ${m[1]} characters long`],
  [/^String should have at least (\d+) characters?/, (m) => `must be at least ${m[1]} characters long`],
  [/^String should match pattern/, () => "is not in a form the server accepts"],
  [/^List should have at least 1 item/, () => "must not be empty"],
  [/^(?:List|Dictionary) should have at (most|least) (\d+) items?/, (m) => `must have at ${m[1]} ${m[2]} item${m[2] === "1" ? "" : "s"}`],
  [/^Value error, (.+)$/, (m) => `is refused: ${m[1]}`],
];

function ruleText(msg: string): string {
  for (const [re, say] of RULES) {
    const m = msg.match(re);
    if (m) return say(m);
  }
  return `is refused: ${msg.charAt(0).toLowerCase()}${msg.slice(1)}`;
}

/** A recipe setting's value the recipe cannot read, e.g. "max_steps='abc' is not a valid int". */
const SETTING_TYPE = /^([\w.-]+)=(.+) is not a valid (int|float|bool)$/;
const TYPE_WORDS: Record<string, string> = { int: "a whole number", float: "a number", bool: "true or false" };

function sentence(text: string): string {
  const t = text.trim();
  if (!t) return t;
  const first = t.charAt(0).toUpperCase() + t.slice(1);
  return /[.!?)]$/.test(first) ? first : `${first}.`;
}

/**
 * Drop the parts of a message that tell a program what to send: API routes ("…; GET
 * /api/runs lists them") and request parameters ("…; across_plans=true compares them
 * anyway"); the page offers its own control for those.
 */
function withoutRoutes(message: string): string {
  const forPrograms = /(^|\s)(GET|POST|PUT|PATCH|DELETE)\s+\/|\/api\/|openapi\.json|\b[a-z]+_[a-z_]+=\S/;
  return message
    .split(/;\s+/)
    .filter((p) => !forPrograms.test(p))
    .join("; ");
}

const BY_STATUS: Record<number, string> = {
  0: "The runwatch server did not answer. Check that it is still running (runwatch ui or runwatch server), then try again.",
  401: "This server needs its access token: open the app once as /?token=<token>, with the token the server was started with.",
  404: "The server does not know this request; the page may be older than the server. Reload the page.",
  405: "The server does not know this request; the page may be older than the server. Reload the page.",
  413: "What was sent is too large for the server; send less.",
  429: "The server is asked too often just now; wait a few seconds, then try again.",
  500: "The server failed on this request; its log has the details. Try again, and if it fails again, read the server's log.",
  502: "The server could not be reached through the proxy in front of it; check that it is running, then reload the page.",
  503: "The server is busy; try again in a few seconds.",
  504: "The server took too long to answer; try again in a few seconds.",
};

/**
 * The error an API answer carries, in plain words for the page: schema checks of the
 * request as "<Field> must be …", routes and status codes left out; the server's own clear
 * messages are kept (as a sentence). Also names the field a schema check is about, so a
 * form can show the message next to it.
 */
export function plainError(raw: string | null, status: number, method = "GET"): { message: string; field: string | null } {
  const text = (raw ?? "").trim();
  if (text.startsWith("bad request:")) {
    const checks = text
      .slice("bad request:".length)
      .split(/;\s+/)
      .map((part) => {
        const at = part.indexOf(": ");
        return at < 0 ? { path: "", msg: part.trim() } : { path: part.slice(0, at).trim(), msg: part.slice(at + 2).trim() };
      });
    if (checks.length === 1 && /^JSON decode error/.test(checks[0].msg)) {
      return { message: "What the page sent could not be read by the server; reload the page and try again.", field: null };
    }
    const said = checks.map((c) => sentence(`${c.path && c.path !== "request" ? fieldLabel(c.path) : "The request"} ${ruleText(c.msg)}`)).join(" ");
    // a form's own fields are the user's to fix; a page's read is the app's (reload it)
    const fix = method === "GET" ? " Reload the page; if this stays, the page and the server may be different versions." : "";
    return { message: said + fix, field: checks.length === 1 && checks[0].path && checks[0].path !== "request" ? checks[0].path : null };
  }
  const setting = text.match(SETTING_TYPE);
  if (setting) {
    return { message: sentence(`The setting ${setting[1]} must be ${TYPE_WORDS[setting[3]]}, not ${setting[2]}`), field: null };
  }
  if (status === 401 || (status === 404 && /^no such API route/.test(text)) || status === 405 || !text) {
    return { message: BY_STATUS[status] ?? `The server refused this request (HTTP ${status}); reload the page and try again.`, field: null };
  }
  const kept = withoutRoutes(text);
  return { message: sentence(kept || (BY_STATUS[status] ?? text)), field: null };
}

async function parse<T>(resp: Response, method: string): Promise<T> {
  let body: unknown = null;
  try {
    body = await resp.json();
  } catch {
    const said = BY_STATUS[resp.status] ?? `The server answered with an error (HTTP ${resp.status}) instead of data; check that it is running, then reload the page.`;
    throw new ApiError(resp.ok ? "The server's answer could not be read; reload the page." : said, resp.status);
  }
  if (!resp.ok) {
    const err = body as { error?: string; status?: number; field?: string | null };
    const status = err.status ?? resp.status;
    const plain = plainError(err.error ?? null, status, method);
    throw new ApiError(plain.message, status, err.field ?? plain.field, err.error ?? null);
  }
  return body as T;
}

/** fetch, with a network failure (no answer at all) as an ApiError in plain words. */
export async function send(url: string, init: RequestInit = {}): Promise<Response> {
  try {
    return await fetch(url, init);
  } catch (e) {
    if (e instanceof DOMException && e.name === "AbortError") throw e;
    throw new ApiError(BY_STATUS[0], 0, null, e instanceof Error ? e.message : String(e));
  }
}

export async function getJSON<T>(path: string, params: Params = {}, signal?: AbortSignal): Promise<T> {
  return parse<T>(await send(`/api${path}${query(params)}`, { signal }), "GET");
}

export async function postJSON<T>(path: string, body: unknown = {}): Promise<T> {
  const resp = await send(`/api${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return parse<T>(resp, "POST");
}

export function runPath(runId: string): string {
  return `/runs/${encodeURIComponent(runId)}`;
}

// --- Several runs at once (GET /api/overlay, docs/api.md "Several runs at once") ----------

/** The keys to chart, named so that the server finds them in each run's own keys. */
export interface KeySelectors {
  /** The key that plays each role (chartspecs' `roles`: the server's find_key = findKey). */
  roles?: string[];
  /** The key logged under each canonical name (chartspecs' `names`: = findName). */
  names?: string[];
  /** Every key under each prefix (chartspecs' `prefix`). */
  prefixes?: string[];
  /** These keys, where a run logged them (charts added with the picker). */
  keys?: string[];
}

export interface OverlayOptions {
  /** Buckets per series (about one per pixel of plot width). */
  points: number;
  /** Each series also carries `time` (x=time). */
  time?: boolean;
  /** false: no bucket min and max (a chart of several runs draws no bands). Default true. */
  bands?: boolean;
  signal?: AbortSignal;
}

/** The selectors that find every line of `specs` in any run. */
export function chartSelectors(specs: readonly ChartSpec[], keys: readonly string[] = []): KeySelectors {
  const lines = specs.flatMap((s) => s.lines);
  return {
    roles: [...new Set(lines.flatMap((l) => l.roles ?? []))],
    names: [...new Set(lines.flatMap((l) => l.names ?? []))],
    prefixes: [...new Set(specs.flatMap((s) => (s.prefix ? [s.prefix] : [])))],
    keys: [...new Set(keys)],
  };
}

/** The /api/overlay path (without /api) for `runs`, `select` and `opts`. */
export function overlayPath(runs: readonly string[], select: KeySelectors, opts: OverlayOptions): string {
  const q = new URLSearchParams();
  for (const r of runs) q.append("run", r);
  for (const r of select.roles ?? []) q.append("role", r);
  for (const n of select.names ?? []) q.append("name", n);
  for (const p of select.prefixes ?? []) q.append("prefix", p);
  for (const k of select.keys ?? []) q.append("key", k);
  q.set("points", String(opts.points));
  if (opts.time) q.set("x", "time");
  if (opts.bands === false) q.set("bands", "false");
  return `/overlay?${q.toString()}`;
}

/**
 * In one request: each run's list fields, keys and stream cursor, and the whole series of
 * the keys `select` picks in it (shared bucket edges). Runs that cannot be read come back
 * in `missing` (with their own error) while the others are answered; an ApiError only when
 * none can be read, or for more than 400 series (then ask /api/series in groups).
 */
export async function getOverlay(runs: readonly string[], select: KeySelectors, opts: OverlayOptions): Promise<Overlay> {
  return getJSON<Overlay>(overlayPath(runs, select, opts), {}, opts.signal);
}
