/**
 * The API's rate-limit counters: a @nestjs/throttler `ThrottlerStorage` that costs the same per request whatever the
 * limit (docs/architecture.md, "Written here rather than taken from a library").
 *
 * The library's own in-memory storage keeps the expiry time of every hit inside the window, filters that list on each
 * request and takes `Math.min(...hits)` of it: per request work and memory grow with the limit (at 1,000,000 per
 * minute, a loaded address keeps about 100,000 numbers and scans them on every request). This one keeps three numbers
 * per address and route, a sliding-window counter:
 *
 * - time is cut into fixed windows of `ttl` ms per key; `current` counts the hits of the present window and
 *   `previous` those of the one just before;
 * - the hits "in the last ttl" are estimated as `current + previous * (1 - elapsed / ttl)`, `elapsed` being how far
 *   into the present window `now` is (exact when hits are spread evenly; never more than `previous` off);
 * - as in the library, a hit that brings the estimate over `limit` is counted and blocks the key for `blockDuration`
 *   ms (the guard answers 429 with Retry-After); while blocked nothing is counted, and when the block ends the counts
 *   start again from zero.
 *
 * Keys idle for two windows (and not blocked) are dropped at most once per window, so memory is bounded by the
 * number of addresses and routes seen in the last two windows.
 */
import { Injectable, type ExecutionContext } from '@nestjs/common';
import { ThrottlerGuard, type ThrottlerStorage } from '@nestjs/throttler';

/** What the guard reads back (the library's ThrottlerStorageRecord). */
export interface RateLimitRecord {
  totalHits: number;
  /** Seconds until the present window ends. */
  timeToExpire: number;
  isBlocked: boolean;
  /** Seconds until the block ends (0 when not blocked). */
  timeToBlockExpire: number;
}

interface Counter {
  windowStart: number;
  windowMs: number;
  current: number;
  previous: number;
  blockedUntil: number;
}

export class SlidingWindowRateLimitStorage implements ThrottlerStorage {
  private readonly counters = new Map<string, Counter>();
  private lastSweep: number;

  constructor(private readonly now: () => number = Date.now) {
    this.lastSweep = now();
  }

  /** How many addresses and routes are tracked now (for tests and the memory bound). */
  get size(): number {
    return this.counters.size;
  }

  async increment(key: string, ttl: number, limit: number, blockDuration: number, throttlerName: string): Promise<RateLimitRecord> {
    const now = this.now();
    const windowMs = Math.max(1, ttl);
    this.sweep(now, windowMs);
    const id = `${throttlerName}\n${key}`;
    let c = this.counters.get(id);
    if (!c || c.windowMs !== windowMs) {
      c = { windowStart: now, windowMs, current: 0, previous: 0, blockedUntil: 0 };
      this.counters.set(id, c);
    }
    if (c.blockedUntil !== 0 && c.blockedUntil <= now) {
      // The block is over: start counting again from nothing, at a window starting now.
      c.blockedUntil = 0;
      c.current = 0;
      c.previous = 0;
      c.windowStart = now;
    }
    const passed = Math.floor((now - c.windowStart) / windowMs);
    if (passed >= 1) {
      c.previous = passed === 1 ? c.current : 0;
      c.current = 0;
      c.windowStart += passed * windowMs;
    }
    const timeToExpire = Math.ceil((c.windowStart + windowMs - now) / 1000);
    if (c.blockedUntil > now)
      return { totalHits: this.estimate(c, now) + 1, timeToExpire, isBlocked: true, timeToBlockExpire: Math.ceil((c.blockedUntil - now) / 1000) };
    c.current++;
    const totalHits = this.estimate(c, now);
    if (totalHits > limit) {
      c.blockedUntil = now + Math.max(1, blockDuration);
      return { totalHits, timeToExpire, isBlocked: true, timeToBlockExpire: Math.ceil((c.blockedUntil - now) / 1000) };
    }
    return { totalHits, timeToExpire, isBlocked: false, timeToBlockExpire: 0 };
  }

  /** Hits in the last window, estimated: the present window's plus the share of the previous one still inside. */
  private estimate(c: Counter, now: number): number {
    const inside = 1 - (now - c.windowStart) / c.windowMs;
    return c.current + Math.floor(c.previous * inside);
  }

  /** Drops keys idle for two windows and not blocked; at most once per window. */
  private sweep(now: number, windowMs: number): void {
    if (now - this.lastSweep < windowMs) return;
    this.lastSweep = now;
    for (const [id, c] of this.counters) if (c.blockedUntil <= now && now - c.windowStart >= 2 * c.windowMs) this.counters.delete(id);
  }
}

/**
 * The throttler guard with its key kept as text (`Controller-handler-throttler-address`) rather than the library's
 * SHA-256 of that text per request: the storage above holds keys in a Map of bounded size, so hashing buys nothing.
 */
@Injectable()
export class ApiThrottlerGuard extends ThrottlerGuard {
  protected override generateKey(context: ExecutionContext, suffix: string, name: string): string {
    return `${context.getClass().name}-${context.getHandler().name}-${name}-${suffix}`;
  }
}
