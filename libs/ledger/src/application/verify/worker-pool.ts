/**
 * A small pool of verification workers. Chunks are handed out round-robin and results come back in submission
 * order. Under ts sources (jest, ts-register) the worker is started through the repository's TypeScript hook.
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { checkChunk, type ChunkInput, type ChunkOutput } from './check-chunk';

function workerEntry(): { file: string; execArgv: string[] } {
  const js = join(__dirname, 'verify.worker.js');
  if (existsSync(js)) return { file: js, execArgv: [] };
  // Running from TypeScript sources: find the repository's require hook.
  let dir = __dirname;
  while (dir !== dirname(dir)) {
    const hook = join(dir, 'tests', 'support', 'ts-register.js');
    if (existsSync(hook)) return { file: join(__dirname, 'verify.worker.ts'), execArgv: ['--require', hook] };
    dir = dirname(dir);
  }
  throw new Error('verification worker script not found (build with `npm run build`)');
}

export interface ChunkChecker {
  check(input: ChunkInput): Promise<ChunkOutput>;
  close(): Promise<void>;
}

/** Runs the checks on the calling thread (small ledgers, tests). */
export function inlineChecker(): ChunkChecker {
  const cache = new Map<string, Uint8Array>();
  return { check: async (input) => checkChunk(input, cache), close: async () => {} };
}

export function workerChecker(count: number): ChunkChecker {
  const { file, execArgv } = workerEntry();
  const workers = Array.from({ length: count }, () => new Worker(file, { execArgv }));
  const pending = new Map<number, { resolve: (o: ChunkOutput) => void; reject: (e: Error) => void }>();
  let seq = 0;
  for (const w of workers) {
    w.on('message', (m: { seq: number; out?: ChunkOutput; error?: string }) => {
      const p = pending.get(m.seq);
      if (!p) return;
      pending.delete(m.seq);
      if (m.out) p.resolve(m.out);
      else p.reject(new Error(m.error ?? 'worker failed'));
    });
    w.on('error', (e) => {
      for (const p of pending.values()) p.reject(e);
      pending.clear();
    });
  }
  return {
    check(input) {
      const s = seq++;
      const w = workers[s % workers.length] as Worker;
      return new Promise((resolve, reject) => {
        pending.set(s, { resolve, reject });
        // The envelope bytes are transferred, not copied; the caller keeps no reference to them.
        w.postMessage({ seq: s, input }, [input.bytes.buffer as ArrayBuffer]);
      });
    },
    async close() {
      await Promise.all(workers.map((w) => w.terminate()));
    },
  };
}
