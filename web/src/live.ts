// Server-sent event streams. EventSource resends Last-Event-ID when it reconnects by
// itself, so the server resumes each stream where it left off. A browser gives a stream
// up for good when its open is answered with an error (a 503 while every database
// connection is busy): such a stream is opened again here after a pause that doubles
// up to MAX_RETRY_MS, from the last event id it had (the URL's `cursor`, when it has one).

export type Handlers = Record<string, (data: unknown) => void>;

const FIRST_RETRY_MS = 1000;
const MAX_RETRY_MS = 30000;

export class LiveStream {
  private source: EventSource;
  private lastId = "";
  private retryMs = FIRST_RETRY_MS;
  private timer: number | undefined;
  private closed = false;

  constructor(
    private readonly url: string,
    private readonly handlers: Handlers,
    private readonly onState?: (connected: boolean) => void,
  ) {
    this.source = this.open(url);
  }

  close(): void {
    this.closed = true;
    window.clearTimeout(this.timer);
    this.source.close();
  }

  private open(url: string): EventSource {
    const source = new EventSource(url);
    for (const [name, fn] of Object.entries(this.handlers)) {
      source.addEventListener(name, (ev) => {
        const msg = ev as MessageEvent<string>;
        if (msg.lastEventId) this.lastId = msg.lastEventId;
        fn(JSON.parse(msg.data));
      });
    }
    source.addEventListener("open", () => {
      this.retryMs = FIRST_RETRY_MS;
      this.onState?.(true);
    });
    source.addEventListener("error", () => {
      this.onState?.(false);
      if (source.readyState === EventSource.CLOSED && !this.closed) this.reopenLater();
    });
    return source;
  }

  private reopenLater(): void {
    window.clearTimeout(this.timer);
    this.timer = window.setTimeout(() => {
      if (!this.closed) this.source = this.open(this.resumeUrl());
    }, this.retryMs);
    this.retryMs = Math.min(this.retryMs * 2, MAX_RETRY_MS);
  }

  // The stream's URL with its cursor moved to the last event received; a URL without a
  // cursor (the run list, which sends `ready` to have the list fetched again) is kept.
  private resumeUrl(): string {
    const url = new URL(this.url, window.location.href);
    if (!this.lastId || !url.searchParams.has("cursor")) return this.url;
    url.searchParams.set("cursor", this.lastId);
    return url.pathname + url.search;
  }
}
