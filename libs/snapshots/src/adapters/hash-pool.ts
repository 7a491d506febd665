import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { workerEntry } from '@assay/core';
import { snapshotError } from '../domain/snapshot.errors';
import { createHashKernel, type HashKernel, type RangeJob, type RangeOutput, type SmallFileJob, type SmallFilesOutput } from './hash-kernel';

type Op = 'hashSmallFiles' | 'hashRange' | 'closePacks';
type JobOf<O extends Op> = O extends 'hashSmallFiles' ? SmallFileJob : O extends 'hashRange' ? RangeJob : Record<string, never>;
type OutOf<O extends Op> = O extends 'hashSmallFiles' ? SmallFilesOutput : O extends 'hashRange' ? RangeOutput : { closed: number };

interface Task {
  id: number;
  op: Op;
  job: SmallFileJob | RangeJob | Record<string, never>;
  resolve(v: unknown): void;
  reject(e: unknown): void;
}

interface Slot {
  worker: Worker;
  inflight: Map<number, Task>;
  dead: boolean;
}

/** Default number of hashing threads: one per core, at most 8. */
export function defaultWorkers(): number {
  return Math.max(1, Math.min(8, availableParallelism()));
}

/**
 * Runs kernel jobs on worker threads (one per core by default), or on the main thread for small amounts of work:
 * starting a worker costs tens of milliseconds, more than hashing a handful of small files, so the pool only
 * starts its workers once the work seen so far exceeds a few MiB.
 */
export class HashPool {
  private slots: Slot[] = [];
  private started = false;
  private closed = false;
  private readonly queue: Task[] = [];
  private nextId = 1;
  private inlineKernel: HashKernel | null = null;
  private inlineBytes = 0;

  /** `workers` 0 means everything runs on the calling thread. */
  constructor(
    private readonly workers = defaultWorkers(),
    private readonly inlineLimitBytes = 4 << 20,
    private readonly perWorkerInflight = 2,
  ) {}

  run<O extends Op>(op: O, job: JobOf<O>, costBytes: number): Promise<OutOf<O>> {
    if (this.closed) return Promise.reject(snapshotError('SNAPSHOT_IO', 'the hashing pool is closed'));
    if (!this.started && (this.workers === 0 || this.inlineBytes + costBytes <= this.inlineLimitBytes)) {
      this.inlineBytes += costBytes;
      this.inlineKernel ??= createHashKernel();
      const k = this.inlineKernel;
      try {
        if (op === 'hashSmallFiles') return Promise.resolve(k.hashSmallFiles(job as SmallFileJob) as OutOf<O>);
        if (op === 'closePacks') return Promise.resolve(k.closePacks() as OutOf<O>);
        return k.hashRange(job as RangeJob) as Promise<OutOf<O>>;
      } catch (e) {
        return Promise.reject(e);
      }
    }
    this.start();
    return new Promise<OutOf<O>>((resolve, reject) => {
      this.queue.push({ id: this.nextId++, op, job, resolve: resolve as (v: unknown) => void, reject });
      this.dispatch();
    });
  }

  /**
   * Would a job of this cost run on the worker threads (started, or about to be)? The caller then prepares what
   * only workers use (e.g. the table of blobs already stored).
   */
  wouldUseWorkers(costBytes: number): boolean {
    return this.started || (this.workers > 0 && this.inlineBytes + costBytes > this.inlineLimitBytes);
  }

  /** Has every thread close its pack files (end of a batch); resolves when they did. */
  async closePacks(): Promise<void> {
    this.inlineKernel?.closePacks();
    if (!this.started || this.closed) return;
    await Promise.all(
      this.slots
        .filter((s) => !s.dead)
        .map(
          (slot) =>
            new Promise<void>((resolve) => {
              const id = this.nextId++;
              slot.inflight.set(id, { id, op: 'closePacks', job: {}, resolve: () => resolve(), reject: () => resolve() });
              slot.worker.postMessage({ id, op: 'closePacks', job: {} });
            }),
        ),
    );
  }

  /** Hands a buffer a `collect` job returned back to a thread for reuse (moved, not copied). */
  recycle(buf: ArrayBuffer): void {
    if (this.closed || buf.byteLength === 0) return;
    if (!this.started) {
      this.inlineKernel?.recycle(buf);
      return;
    }
    const live = this.slots.filter((s) => !s.dead);
    if (live.length === 0) return;
    this.recycled = (this.recycled + 1) % live.length;
    (live[this.recycled] as Slot).worker.postMessage({ op: 'recycle', job: buf }, [buf]);
  }

  private recycled = 0;

  /** Starts the worker threads now (they boot in the background); a no-op with 0 workers. */
  start(): void {
    if (this.started || this.workers === 0 || this.closed) return;
    this.started = true;
    const { file, execArgv } = workerEntry(__dirname, 'hash.worker');
    for (let i = 0; i < this.workers; i++) {
      const worker = new Worker(file, { execArgv });
      const slot: Slot = { worker, inflight: new Map(), dead: false };
      worker.on('message', (m: { id: number; ok: boolean; result?: unknown; message?: string }) => {
        const t = slot.inflight.get(m.id);
        if (!t) return;
        slot.inflight.delete(m.id);
        if (m.ok) t.resolve(m.result);
        else t.reject(snapshotError('SNAPSHOT_IO', `hashing worker failed: ${m.message ?? 'unknown error'}`));
        this.dispatch();
      });
      const fail = (why: string) => {
        if (slot.dead) return;
        slot.dead = true;
        for (const t of slot.inflight.values()) t.reject(snapshotError('SNAPSHOT_IO', `hashing worker ${why}`));
        slot.inflight.clear();
        if (!this.closed && this.slots.every((s) => s.dead)) {
          for (const t of this.queue.splice(0)) t.reject(snapshotError('SNAPSHOT_IO', 'all hashing workers died'));
        }
        this.dispatch();
      };
      worker.on('error', (e) => fail(`crashed: ${e.message}`));
      worker.on('exit', (code) => fail(`exited with code ${code}`));
      this.slots.push(slot);
    }
  }

  private dispatch(): void {
    while (this.queue.length > 0) {
      let best: Slot | null = null;
      for (const s of this.slots) {
        if (s.dead || s.inflight.size >= this.perWorkerInflight) continue;
        if (!best || s.inflight.size < best.inflight.size) best = s;
      }
      if (!best) return;
      const t = this.queue.shift() as Task;
      best.inflight.set(t.id, t);
      best.worker.postMessage({ id: t.id, op: t.op, job: t.job });
    }
  }

  /** How many threads jobs are spread over (1 until the workers are started). */
  get parallelism(): number {
    return this.started ? this.slots.filter((s) => !s.dead).length : 1;
  }

  /** True once worker threads are in use (tests, benchmarks). */
  get usingWorkers(): boolean {
    return this.started;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    await this.closePacks().catch(() => undefined);
    this.closed = true;
    for (const t of this.queue.splice(0)) t.reject(snapshotError('SNAPSHOT_IO', 'the hashing pool was closed'));
    const slots = this.slots;
    this.slots = [];
    await Promise.all(
      slots.map(async (s) => {
        s.dead = true;
        for (const t of s.inflight.values()) t.reject(snapshotError('SNAPSHOT_IO', 'the hashing pool was closed'));
        s.inflight.clear();
        await s.worker.terminate();
      }),
    );
  }
}
