import { randomUUID } from 'node:crypto';

/** Time is injected so replays and tests are deterministic. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

/**
 * Injection tokens for the Clock and the IdGenerator where a composition root binds them (the NestJS modules of the
 * libs provide them; tests bind a ManualClock and SequentialIds).
 */
export const CLOCK = Symbol.for('assay.Clock');
export const ID_GENERATOR = Symbol.for('assay.IdGenerator');

/** A clock that only moves when told to. */
export class ManualClock implements Clock {
  private t: number;
  constructor(
    start: Date | string = '2026-01-01T00:00:00.000Z',
    private readonly stepMs = 0,
  ) {
    this.t = new Date(start).getTime();
  }
  now(): Date {
    const d = new Date(this.t);
    this.t += this.stepMs;
    return d;
  }
  advance(ms: number): void {
    this.t += ms;
  }
}

/** Ids are injected for the same reason. */
export interface IdGenerator {
  next(): string;
}

export const randomIds: IdGenerator = { next: () => randomUUID() };

/** Deterministic UUID-shaped ids for tests: 00000000-0000-4000-8000-<counter>. */
export class SequentialIds implements IdGenerator {
  private n = 0;
  constructor(private readonly prefix = '00000000-0000-4000-8000') {}
  next(): string {
    this.n += 1;
    return `${this.prefix}-${this.n.toString(16).padStart(12, '0')}`;
  }
}
