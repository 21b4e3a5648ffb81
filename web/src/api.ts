// Thin typed client for the runwatch HTTP API; every error becomes an ApiError.

export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    /** The request field the error is about (a form shows the message next to it). */
    readonly field: string | null = null,
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

async function parse<T>(resp: Response): Promise<T> {
  let body: unknown = null;
  try {
    body = await resp.json();
  } catch {
    throw new ApiError(`The server answered ${resp.status} without JSON.`, resp.status);
  }
  if (!resp.ok) {
    const err = body as { error?: string; status?: number; field?: string | null };
    throw new ApiError(err.error ?? `The server answered ${resp.status}.`, err.status ?? resp.status, err.field ?? null);
  }
  return body as T;
}

export async function getJSON<T>(path: string, params: Params = {}, signal?: AbortSignal): Promise<T> {
  return parse<T>(await fetch(`/api${path}${query(params)}`, { signal }));
}

export async function postJSON<T>(path: string, body: unknown = {}): Promise<T> {
  const resp = await fetch(`/api${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return parse<T>(resp);
}

export function runPath(runId: string): string {
  return `/runs/${encodeURIComponent(runId)}`;
}
