// Thin typed client for the runwatch HTTP API; every error becomes an ApiError.

export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
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
    const err = body as { error?: string; status?: number };
    throw new ApiError(err.error ?? `HTTP ${resp.status}`, err.status ?? resp.status);
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
