/**
 * A small pool of verification workers. Requests are handed out round-robin and each resolves with its own reply.
 * Under ts sources (jest, ts-register) the worker is started through the repository's TypeScript hook.
 */
import { Worker } from 'node:worker_threads';
import { join } from 'node:path';
import { workerEntry } from '@assay/core';
import type { ParallelReadSpec } from '../../ports/event-store.port';
import { checkChunk, type ChunkInput, type ChunkMeta, type ChunkOutput, type VerifyKernels } from './check-chunk';
import type { SignatureBatch } from './signature-pack';

export interface ChunkChecker {
  check(input: ChunkInput): Promise<ChunkOutput>;
  close(): Promise<void>;
}

/** Workers that can also read a store by themselves (parallelReadSpec). */
export interface RangeChecker extends ChunkChecker {
  /** Reads and checks events [from, to) on a worker. */
  checkRange(spec: ParallelReadSpec, from: number, to: number, keys: Array<[string, Uint8Array]>): Promise<{ out: ChunkOutput; meta: ChunkMeta }>;
  /** The stored KeyRegistered events' bytes, read on a worker. */
  keyRegistrations(spec: ParallelReadSpec): Promise<Array<{ position: number; bytes: Uint8Array }>>;
  /** The storage integrity check, on a worker: problems, or an empty list. */
  integrityProblems(spec: ParallelReadSpec): Promise<string[]>;
  /** The indexes of a batch's items whose Ed25519 signature does not verify (signature-batch.ts). */
  signatures(batch: SignatureBatch): Promise<number[]>;
  /** Requests sent to the least busy worker and not answered yet. */
  leastPending(): number;
}

/** Runs the checks on the calling thread (small ledgers, tests). */
export function inlineChecker(kernels?: VerifyKernels): ChunkChecker {
  const cache = new Map<string, Uint8Array>();
  return { check: async (input) => checkChunk(input, cache, kernels), close: async () => {} };
}

interface Reply {
  seq: number;
  out?: ChunkOutput;
  meta?: ChunkMeta;
  keys?: Array<{ position: number; bytes: Uint8Array }>;
  problems?: string[];
  bad?: number[];
  error?: string;
}

export function workerChecker(count: number): RangeChecker {
  // The worker is a composition root (it wires the SQLite range reader and the kernels addon), so it lives in home/.
  const { file, execArgv } = workerEntry(join(__dirname, '..', '..', 'home'), 'verify.worker');
  const workers = Array.from({ length: count }, () => new Worker(file, { execArgv }));
  const pending = new Map<number, { resolve: (r: Reply) => void; reject: (e: Error) => void }>();
  const load = workers.map(() => 0);
  let seq = 0;
  workers.forEach((w, k) => {
    w.on('message', (m: Reply) => {
      const p = pending.get(m.seq);
      if (!p) return;
      pending.delete(m.seq);
      load[k] = (load[k] as number) - 1;
      if (m.error === undefined) p.resolve(m);
      else p.reject(new Error(m.error));
    });
    w.on('error', (e) => {
      for (const p of pending.values()) p.reject(e);
      pending.clear();
    });
  });
  /** To the worker with the fewest requests pending (the first of them on a tie). */
  const post = (msg: Record<string, unknown>, transfer: ArrayBuffer[] = []): Promise<Reply> => {
    const s = seq++;
    let k = 0;
    for (let j = 1; j < workers.length; j++) if ((load[j] as number) < (load[k] as number)) k = j;
    load[k] = (load[k] as number) + 1;
    return new Promise((resolve, reject) => {
      pending.set(s, { resolve, reject });
      (workers[k] as Worker).postMessage({ ...msg, seq: s }, transfer);
    });
  };
  return {
    // The envelope bytes are transferred, not copied; the caller keeps no reference to them.
    check: async (input) => (await post({ op: 'chunk', input }, [input.bytes.buffer as ArrayBuffer])).out as ChunkOutput,
    async checkRange(spec, from, to, keys) {
      const r = await post({ op: 'range', spec, from, to, keys });
      return { out: r.out as ChunkOutput, meta: r.meta as ChunkMeta };
    },
    keyRegistrations: async (spec) => (await post({ op: 'keys', spec })).keys ?? [],
    integrityProblems: async (spec) => (await post({ op: 'integrity', spec })).problems ?? [],
    signatures: async (b) =>
      (await post({ op: 'signatures', batch: b }, [b.messages.buffer as ArrayBuffer, b.keys.buffer as ArrayBuffer, b.signatures.buffer as ArrayBuffer])).bad ??
      [],
    leastPending: () => Math.min(...load),
    async close() {
      await Promise.all(workers.map((w) => w.terminate()));
    },
  };
}
