/**
 * Many independent Ed25519 checks at once, on worker threads: what a verifier of a file (a result bundle) needs once
 * the ordered checks (roles, revocations, which key signed what) have decided each event's key. Only the signature
 * arithmetic moves off the calling thread; the answer is the first item (in the caller's order) that fails, so a
 * report names the same item whether the checks ran here or on workers.
 */
import { workerChecker, type RangeChecker } from './worker-pool';
import { nodeEd25519 } from '../../crypto/ed25519';
import { packSignatures, type SignedItem } from './signature-pack';

export { badSignaturesIn, packSignatures, type SignatureBatch, type SignedItem } from './signature-pack';

export interface SignatureCheckOptions {
  /** Worker threads (0: check on this thread). */
  readonly workers: number;
  /** Items per batch sent to a worker (default 1,024). */
  readonly batch?: number;
  /** Called with the number of items checked so far, as batches finish. */
  readonly progress?: (done: number) => void;
}

/**
 * Signature checks fed one item at a time, as a verifier reads: every `batch` items go to a worker at once (or are
 * checked here, with no workers), so the arithmetic overlaps the reading. `firstBad` answers for everything added.
 * `close` stops the workers; call it on every path (a try/finally).
 */
export class SignatureChecks {
  private pool: RangeChecker | null = null;
  private queued: SignedItem[] = [];
  private readonly results: Array<Promise<number>> = [];
  private dispatched = 0;
  private done = 0;
  private readonly size: number;

  constructor(private readonly o: SignatureCheckOptions) {
    this.size = Math.max(1, o.batch ?? 1024);
  }

  add(item: SignedItem): void {
    this.queued.push(item);
    if (this.queued.length >= this.size) this.flush();
  }

  /** The index (in the order added) of the first item whose signature fails, or -1. */
  async firstBad(): Promise<number> {
    this.flush();
    const firsts = await Promise.all(this.results);
    return firsts.find((i) => i >= 0) ?? -1;
  }

  async close(): Promise<void> {
    const pool = this.pool;
    this.pool = null;
    await pool?.close();
  }

  private flush(): void {
    const part = this.queued;
    if (part.length === 0) return;
    this.queued = [];
    const from = this.dispatched;
    this.dispatched += part.length;
    const finished = (bad: readonly number[]): number => {
      this.done += part.length;
      this.o.progress?.(this.done);
      return bad.length > 0 ? from + (bad[0] as number) : -1;
    };
    if (this.o.workers <= 0) {
      const bad = part.findIndex((it) => !nodeEd25519.verify(it.key, it.message, it.signature));
      this.results.push(Promise.resolve(finished(bad >= 0 ? [bad] : [])));
      return;
    }
    this.pool ??= workerChecker(this.o.workers);
    this.results.push(this.pool.signatures(packSignatures(part)).then(finished));
  }
}

/** Checks every item's signature; resolves with the index of the first item that fails, or -1. */
export async function firstBadSignature(items: readonly SignedItem[], o: SignatureCheckOptions): Promise<number> {
  const checks = new SignatureChecks(o);
  try {
    for (const it of items) checks.add(it);
    return await checks.firstBad();
  } finally {
    await checks.close();
  }
}
