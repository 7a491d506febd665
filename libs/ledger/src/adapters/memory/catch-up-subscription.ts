/**
 * A catch-up subscription over a local, position-indexed log (memory or SQLite): reads from a position in
 * batches, hands each event to the subscriber in global order, one at a time and never twice, then waits to be
 * woken (by the store after a commit, or by a poll timer that picks up writes of other processes) and goes on.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { RecordedEvent, SubscribeOptions, Subscription } from '../../ports/event-store.port';
import { subscriptionStopped } from '../../ports/event-store.errors';

export interface PositionalSource {
  /** Events with position >= `position`, in position order, at most `limit` of them. */
  readFrom(position: number, limit: number): RecordedEvent[];
  /** The next global position (= number of events). */
  size(): number;
}

export interface CatchUpOptions {
  /** Also look for new events this often while idle (writes by other processes); none when undefined. */
  pollMs?: number;
  batchSize?: number;
  /** Called once when the subscription has ended (stopped, failed). */
  onEnded?: () => void;
}

/** Which subscription's handler is running, so that `stop()` called from inside a handler does not wait on itself. */
const inHandler = new AsyncLocalStorage<CatchUpSubscription>();

export class CatchUpSubscription implements Subscription {
  readonly caughtUp: Promise<void>;
  private resolveCaughtUp!: () => void;
  private rejectCaughtUp!: (e: unknown) => void;
  private isCaughtUp = false;
  private stopped = false;
  private next: number;
  private readonly startSize: number;
  private wake: (() => void) | null = null;
  private timer: NodeJS.Timeout | null = null;
  private readonly finished: Promise<void>;
  private readonly batchSize: number;

  constructor(
    private readonly source: PositionalSource,
    private readonly opts: SubscribeOptions,
    private readonly config: CatchUpOptions = {},
  ) {
    this.caughtUp = new Promise<void>((resolve, reject) => {
      this.resolveCaughtUp = resolve;
      this.rejectCaughtUp = reject;
    });
    // A subscriber that never looks at caughtUp must not get an unhandled rejection.
    this.caughtUp.catch(() => undefined);
    const from = opts.fromPosition ?? 0;
    if (!Number.isSafeInteger(from) || from < 0) throw new RangeError('fromPosition must be an integer >= 0');
    this.next = from;
    this.batchSize = Math.max(1, config.batchSize ?? 500);
    this.startSize = source.size();
    this.finished = this.run();
  }

  /** The store calls this after each commit. */
  notify(): void {
    const w = this.wake;
    if (w) {
      this.wake = null;
      w();
    }
  }

  stop(): Promise<void> {
    if (!this.stopped) {
      this.stopped = true;
      this.notify();
    }
    // From inside this subscription's own handler, waiting for the loop to finish would wait on ourselves.
    if (inHandler.getStore() === this) return Promise.resolve();
    return this.finished;
  }

  private markCaughtUp(): void {
    if (!this.isCaughtUp) {
      this.isCaughtUp = true;
      this.resolveCaughtUp();
    }
  }

  private waitForWake(): Promise<void> {
    return new Promise<void>((resolve) => {
      this.wake = () => {
        if (this.timer) {
          clearTimeout(this.timer);
          this.timer = null;
        }
        resolve();
      };
      if (this.config.pollMs !== undefined) this.timer = setTimeout(() => this.notify(), this.config.pollMs);
    });
  }

  private async run(): Promise<void> {
    // Never call the handler synchronously from subscribe().
    await Promise.resolve();
    try {
      while (!this.stopped) {
        const batch = this.source.readFrom(this.next, this.batchSize);
        if (batch.length === 0) {
          if (this.next >= this.startSize) this.markCaughtUp();
          if (this.stopped) break;
          await this.waitForWake();
          continue;
        }
        for (const e of batch) {
          if (this.stopped) break;
          if (e.position < this.next) continue; // never twice
          await inHandler.run(this, () => this.opts.onEvent(e));
          this.next = e.position + 1;
          if (this.next >= this.startSize) this.markCaughtUp();
        }
      }
      if (!this.isCaughtUp) this.rejectCaughtUp(subscriptionStopped());
    } catch (err) {
      this.stopped = true;
      if (!this.isCaughtUp) this.rejectCaughtUp(err);
      try {
        this.opts.onError?.(err);
      } catch {
        // an error handler that throws has nowhere left to report to
      }
    } finally {
      if (this.timer) clearTimeout(this.timer);
      this.timer = null;
      this.wake = null;
      this.config.onEnded?.();
    }
  }
}
