/**
 * How checked chunks reach the ordered pass, in position order: with worker threads that read the rows themselves
 * (the calling thread then runs the ordered pass and, given a row reader, checks chunks too whenever the workers have
 * enough queued), or by reading the store here in batches and handing them to the checker. Either way at most
 * `maxInFlight` chunks are checked ahead of the pass.
 */
import type { VerifierKeyDecoder } from '../../domain/key-registry';
import type { EventStore, ParallelReadSpec, RecordedEvent } from '../../ports/event-store.port';
import { checkRange, packChunk, type ChunkMeta, type ChunkOutput, type RowReader, type VerifyKernels } from './check-chunk';
import type { CheckedChunk } from './ordered-pass';
import type { ChunkChecker, RangeChecker } from './worker-pool';
import { Failed } from './verify-failure';

export interface FeedOptions {
  store: EventStore;
  decodeKey: VerifierKeyDecoder;
  kernels: VerifyKernels;
  /** Events in the store when the verification started. */
  total: number;
  chunkSize: number;
  maxInFlight: number;
  /** The worker pool, when the verification runs on worker threads. */
  pool: RangeChecker | null;
  /** The store's parallel read spec, when the workers read the rows themselves. */
  spec: ParallelReadSpec | null;
  /** The checker of store-read batches (the pool, or this thread's inline checker). */
  checker: ChunkChecker;
  /** This thread's own row reader, when it checks chunks too. */
  local: { reader: RowReader; keyCache: Map<string, Uint8Array> } | null;
  /** The ordered pass: each checked chunk, in position order. */
  take: (c: CheckedChunk) => Promise<void>;
}

/** Feeds every event of the store, checked, to `o.take` in position order. */
export async function feedCheckedChunks(o: FeedOptions): Promise<void> {
  const { total, chunkSize, maxInFlight, pool, spec, checker, local, kernels } = o;
  const inFlight: Array<Promise<CheckedChunk>> = [];
  const consume = async (): Promise<void> => o.take(await (inFlight.shift() as Promise<CheckedChunk>));

  // Keys the signature checks use: a hint, the first registration of each key id (a key id is registered once);
  // the ordered pass below checks that the key a signature was checked with is the one registered for its signer.
  const knownKeys = new Map<string, Uint8Array>();
  const hintKey = (bytes: Uint8Array): void => {
    try {
      const data = JSON.parse(Buffer.from(bytes).toString('utf8')).data as { keyId?: unknown; publicKey?: unknown };
      if (typeof data.publicKey === 'string' && typeof data.keyId === 'string' && !knownKeys.has(data.keyId))
        knownKeys.set(data.keyId, o.decodeKey(data.publicKey).publicKey);
    } catch {
      // a malformed key event is reported by the ordered checks
    }
  };
  const storeRead = async (position: number): Promise<{ id: string; bytes: Uint8Array; hash: Uint8Array }> => {
    for await (const batch of o.store.readAll({ fromPosition: position, toPosition: position + 1 })) for (const e of batch) return e;
    throw new Failed({ step: 'envelopes', code: 'VERIFY_POSITION_GAP', message: `position ${position} disappeared during verification`, position });
  };

  if (pool && spec) {
    // The workers read the rows themselves; this thread runs the ordered pass and, with a row reader, checks too.
    const readFailed = (e: unknown): never => {
      throw new Failed({ step: 'storage', code: 'VERIFY_STORAGE_READ', message: `reading the stored events failed: ${(e as Error).message}` });
    };
    // The key hints: read here when this thread has a reader (the first worker is busy starting and running the
    // storage check meanwhile), else by a worker.
    const reader = local?.reader;
    const registrations = await (reader ? Promise.resolve().then(() => reader.keyRegistrations()) : pool.keyRegistrations(spec)).catch(readFailed);
    for (const k of registrations) hintKey(k.bytes);
    const keys = [...knownKeys.entries()];
    const keyMap = new Map(keys);
    const checkedChunk = (checked: Promise<{ out: ChunkOutput; meta: ChunkMeta }>): Promise<CheckedChunk> =>
      checked.then(
        ({ out, meta }) => ({
          n: meta.positions.length,
          out,
          keys: keyMap,
          position: (i) => meta.positions[i] as number,
          revision: (i) => meta.revisions[i] as number,
          stream: (i) => meta.streams[meta.streamIndex[i] as number] as string,
          type: (i) => meta.types[meta.typeIndex[i] as number] as string,
          event: (i) => storeRead(meta.positions[i] as number),
        }),
        readFailed,
      );
    const settled = new WeakSet<Promise<CheckedChunk>>();
    const track = (p: Promise<CheckedChunk>): void => {
      const mark = (): void => void settled.add(p);
      p.then(mark, mark);
      inFlight.push(p);
    };
    let from = 0;
    const nextRange = (): [number, number] => {
      const f = from;
      from = Math.min(total, from + chunkSize);
      return [f, from];
    };
    // Keep every worker two chunks ahead; take the oldest chunk in order as soon as it is checked; otherwise, when
    // this thread is a checker, check the next chunk here instead of waiting.
    while (from < total || inFlight.length > 0) {
      while (from < total && inFlight.length < maxInFlight && pool.leastPending() < 2) track(checkedChunk(pool.checkRange(spec, ...nextRange(), keys)));
      const head = inFlight[0];
      if (head && settled.has(head)) await consume();
      else if (local && from < total && inFlight.length < maxInFlight) {
        const [a, b] = nextRange();
        const { reader, keyCache } = local;
        // Checked now, synchronously; a read failure becomes a rejection like a worker's.
        track(checkedChunk(new Promise((resolve) => resolve(checkRange(reader, a, b, keys, keyCache, kernels)))));
        // Let the workers' replies in (they arrive as events) before deciding again.
        await new Promise((resolve) => setImmediate(resolve));
      } else if (head) await consume();
    }
  } else {
    for await (const batch of o.store.readAll({ batchSize: chunkSize })) {
      for (const e of batch) if (e.type === 'KeyRegistered') hintKey(e.bytes);
      const input = packChunk(batch, [...knownKeys.entries()]);
      const keys = new Map(knownKeys);
      inFlight.push(
        checker.check(input).then((out) => ({
          n: batch.length,
          out,
          keys,
          position: (i) => (batch[i] as RecordedEvent).position,
          revision: (i) => (batch[i] as RecordedEvent).revision,
          stream: (i) => (batch[i] as RecordedEvent).stream,
          type: (i) => (batch[i] as RecordedEvent).type,
          event: async (i) => batch[i] as RecordedEvent,
        })),
      );
      if (inFlight.length >= maxInFlight) await consume();
    }
  }

  while (inFlight.length > 0) await consume();
}
