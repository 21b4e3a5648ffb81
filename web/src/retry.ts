// The reads of a view that the server may not answer (it is down): each says so in its
// card's failure line and, kept under a key, is made again every READ_AGAIN_MS until the
// server answers, which clears the line. The run page's charts and the compare page share it.

import { ApiError } from "./api";
import type { FailureLine } from "./dom";

export const READ_AGAIN_MS = 2000;
/** What a failed read that is made again says after its error. */
export const READ_AGAIN = `The page reads it again every ${READ_AGAIN_MS / 1000} s, and shows it once the server answers.`;

/** A read: its work, the line of the card it reads for, and what it says failed (the
 * line's own words by default; a function says it as things are when the read fails). */
export interface Read {
  work: () => Promise<void>;
  line: FailureLine;
  what?: string | (() => string);
}

/** A read made at each turn while `wanted()` holds (a live run's new points), beside the
 * reads made again; it fails and is made again as they are, under the key "poll". */
export interface Poll extends Read {
  wanted: () => boolean;
}

export class Reads {
  // the reads that failed, by what they read (the owner's keys: "build", "zoom:<chart>"),
  // each made again at the next turn
  private failed = new Map<string, Read>();
  private timer: number | undefined;
  private turning = false;
  private disposed = false;

  constructor(private readonly poll: Poll | null = null) {}

  /**
   * Make `read.work`; where the server does not answer it, say so in `read.line`. A read
   * under a `key` is then made again at each turn until it answers (a later read under the
   * same key takes its place: each work reads what its view shows when it runs, so which
   * one is made again does not matter); one without (an export, which a click makes again)
   * is not. The line goes once a read answers and none of its card's is left to make again.
   * Only the server's failures (ApiError) are caught: any other is the page's own, left
   * uncaught.
   */
  async read(key: string | null, read: Read): Promise<void> {
    if (key) this.failed.delete(key);
    try {
      await read.work();
    } catch (e) {
      if (!(e instanceof ApiError)) throw e;
      if (this.disposed) return;
      if (key) this.failed.set(key, read);
      read.line.show(e, key ? READ_AGAIN : "", typeof read.what === "function" ? read.what() : read.what);
      this.wake();
      return;
    }
    if (this.disposed) return;
    if (![...this.failed.values()].some((r) => r.line === read.line)) read.line.clear();
  }

  /** Turn in READ_AGAIN_MS (unless a turn is under way or due) while a read is left to make
   * again or the poll is wanted: the owner calls it when its poll may have become wanted. */
  wake(): void {
    if (this.disposed || this.turning || this.timer !== undefined) return;
    if (!this.failed.size && !this.poll?.wanted()) return;
    this.timer = window.setTimeout(() => {
      this.timer = undefined;
      this.turning = true;
      void this.turn().finally(() => {
        this.turning = false;
        this.wake();
      });
    }, READ_AGAIN_MS);
  }

  /** Make again the reads that failed, and the poll where it is wanted. */
  private async turn(): Promise<void> {
    const reads = new Map(this.failed);
    if (this.poll?.wanted() && !reads.has("poll")) reads.set("poll", this.poll);
    await Promise.all([...reads].map(([key, r]) => this.read(key, r)));
  }

  dispose(): void {
    this.disposed = true;
    window.clearTimeout(this.timer);
    this.failed.clear();
  }
}
