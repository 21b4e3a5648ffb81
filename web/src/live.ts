// Server-sent event streams. EventSource resends Last-Event-ID on reconnect,
// so the server resumes each stream where it left off.

export type Handlers = Record<string, (data: unknown) => void>;

export class LiveStream {
  private source: EventSource;

  constructor(url: string, handlers: Handlers, onState?: (connected: boolean) => void) {
    this.source = new EventSource(url);
    for (const [name, fn] of Object.entries(handlers)) {
      this.source.addEventListener(name, (ev) => fn(JSON.parse((ev as MessageEvent<string>).data)));
    }
    this.source.addEventListener("open", () => onState?.(true));
    this.source.addEventListener("error", () => onState?.(false));
  }

  close(): void {
    this.source.close();
  }
}
