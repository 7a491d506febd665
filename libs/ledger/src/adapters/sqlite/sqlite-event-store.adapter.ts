/**
 * The embedded EventStore over SQLite (better-sqlite3, WAL, synchronous = FULL).
 *
 * Group commit: `append` queues its request; on the next turn of the event loop every queued request is written
 * in one `BEGIN IMMEDIATE ... COMMIT` transaction (one fsync), each inside its own SAVEPOINT so that one request's
 * failure (wrong expected revision, a seal that throws) rolls back only that request. Revisions, positions and
 * chain links are read from the database inside the transaction, never from a cached counter, so several
 * processes can write the same file.
 */
import type Database from 'better-sqlite3';
import { ZERO_HASH, sha256 } from '../../domain/envelope';
import type {
  AppendRequest,
  AppendResult,
  EventStore,
  ParallelReadSpec,
  ReadAllOptions,
  ReadStreamOptions,
  RecordedEvent,
  SealInput,
  SubscribeOptions,
  Subscription,
} from '../../ports/event-store.port';
import { atRequest, storeClosed } from '../../ports/event-store.errors';
import { assertSameContent, planAppend, sealedBytes, validateAppendRequest, type StoredIdLocation } from '../memory/append-rules';
import { CatchUpSubscription } from '../memory/catch-up-subscription';
import { translateDbError } from './sqlite.errors';

export interface SqliteEventStoreOptions {
  /** For messages. */
  path: string;
  /** How often an idle subscription looks for events written by other processes (ms). Default 100. */
  pollIntervalMs?: number;
  /** Most append requests committed in one transaction. Default 1000. */
  maxRequestsPerCommit?: number;
  /** Rows per query when reading a stream or catching up. Default 500. */
  readBatchSize?: number;
}

/** Counters, for tests and benchmarks. */
export interface GroupCommitStats {
  /** Write transactions committed. */
  transactions: number;
  /** Append requests that went through a transaction (successful, idempotent or failed). */
  requests: number;
  /** New events written. */
  events: number;
}

interface Pending {
  req: AppendRequest;
  resolve: (r: AppendResult) => void;
  reject: (e: unknown) => void;
}

/** A row of the events table (migrations/0001_ledger.sql), as better-sqlite3 returns it. */
export interface EventRow {
  position: number;
  stream: string;
  revision: number;
  id: string;
  type: string;
  bytes: Buffer;
  hash: Buffer;
}
type Row = EventRow;

const COLS = 'position, stream, revision, id, type, bytes, hash';

function toRecorded(r: Row): RecordedEvent {
  return { position: r.position, stream: r.stream, revision: r.revision, id: r.id, type: r.type, bytes: r.bytes, hash: r.hash };
}

export class SqliteEventStore implements EventStore {
  readonly stats: GroupCommitStats = { transactions: 0, requests: 0, events: 0 };
  private queue: Pending[] = [];
  private scheduled: NodeJS.Immediate | null = null;
  private closed = false;
  private readonly subs = new Set<CatchUpSubscription>();
  private readonly path: string;
  private readonly pollMs: number;
  private readonly maxPerCommit: number;
  private readonly readBatch: number;

  private readonly s: {
    begin: Database.Statement;
    commit: Database.Statement;
    rollback: Database.Statement;
    savepoint: Database.Statement;
    release: Database.Statement;
    rollbackTo: Database.Statement;
    nextPosition: Database.Statement;
    head: Database.Statement;
    byId: Database.Statement;
    insert: Database.Statement;
    range: Database.Statement;
    fwd: Database.Statement;
    bwd: Database.Statement;
    all: Database.Statement;
    revision: Database.Statement;
  };

  constructor(
    private readonly db: Database.Database,
    opts: SqliteEventStoreOptions,
  ) {
    this.path = opts.path;
    this.pollMs = opts.pollIntervalMs ?? 100;
    this.maxPerCommit = Math.max(1, opts.maxRequestsPerCommit ?? 1000);
    this.readBatch = Math.max(1, opts.readBatchSize ?? 500);
    const p = (sql: string) => db.prepare(sql);
    this.s = {
      begin: p('BEGIN IMMEDIATE'),
      commit: p('COMMIT'),
      rollback: p('ROLLBACK'),
      savepoint: p('SAVEPOINT append_request'),
      release: p('RELEASE append_request'),
      rollbackTo: p('ROLLBACK TO append_request'),
      nextPosition: p('SELECT coalesce(max(position) + 1, 0) FROM events').pluck(),
      head: p('SELECT revision, hash FROM events WHERE stream = ? ORDER BY revision DESC LIMIT 1'),
      byId: p('SELECT stream, revision FROM events WHERE id = ?'),
      insert: p('INSERT INTO events (position, stream, revision, id, type, bytes, hash) VALUES (?, ?, ?, ?, ?, ?, ?)'),
      range: p(`SELECT ${COLS} FROM events WHERE stream = ? AND revision BETWEEN ? AND ? ORDER BY revision`),
      fwd: p(`SELECT ${COLS} FROM events WHERE stream = ? AND revision >= ? ORDER BY revision ASC LIMIT ?`),
      bwd: p(`SELECT ${COLS} FROM events WHERE stream = ? AND revision <= ? ORDER BY revision DESC LIMIT ?`),
      all: p(`SELECT ${COLS} FROM events WHERE position >= ? AND position < ? ORDER BY position ASC LIMIT ?`),
      revision: p('SELECT max(revision) FROM events WHERE stream = ?').pluck(),
    };
  }

  /** The file, for verification workers' own read-only connections (not for an in-memory database). */
  parallelReadSpec(): ParallelReadSpec | null {
    return this.db.memory ? null : { kind: 'sqlite', path: this.db.name };
  }

  append(req: AppendRequest): Promise<AppendResult> {
    if (this.closed) return Promise.reject(storeClosed(`ledger database ${this.path}`));
    try {
      validateAppendRequest(req);
    } catch (e) {
      return Promise.reject(e);
    }
    return new Promise<AppendResult>((resolve, reject) => {
      this.queue.push({ req, resolve, reject });
      this.schedule();
    });
  }

  /**
   * All requests or none, in one `BEGIN IMMEDIATE ... COMMIT` of their own (see EventStore.appendMany): a bulk import
   * commits once (one fsync) and a failure leaves the log as it was. Synchronous inside: nothing else of this
   * process writes meanwhile, and other processes wait for the write lock (busy timeout).
   */
  async appendMany(reqs: AppendRequest[], onProgress?: (done: number) => void): Promise<AppendResult[]> {
    if (this.closed) throw storeClosed(`ledger database ${this.path}`);
    reqs.forEach((req, i) => {
      try {
        validateAppendRequest(req);
      } catch (e) {
        throw atRequest(e, i);
      }
    });
    // Queued single appends go first, in their own transaction, so the order of this process's writes is kept.
    if (this.scheduled !== null) {
      clearImmediate(this.scheduled);
      this.scheduled = null;
    }
    while (this.queue.length > 0) this.flush();
    const results: AppendResult[] = [];
    try {
      this.s.begin.run();
      try {
        for (const [i, req] of reqs.entries()) {
          try {
            results.push(this.applyOne(req));
          } catch (e) {
            throw atRequest(translateDbError(this.path, e), i);
          }
          if (onProgress && (i + 1) % 250 === 0) onProgress(i + 1);
        }
        this.s.commit.run();
      } catch (e) {
        this.rollbackQuietly();
        throw e;
      }
    } catch (e) {
      throw translateDbError(this.path, e);
    }
    onProgress?.(reqs.length);
    this.stats.transactions += 1;
    this.stats.requests += reqs.length;
    let wrote = false;
    for (const r of results)
      if (!r.idempotent) {
        wrote = true;
        this.stats.events += r.events.length;
      }
    if (wrote) for (const sub of this.subs) sub.notify();
    return results;
  }

  private schedule(): void {
    if (this.scheduled === null && this.queue.length > 0) this.scheduled = setImmediate(() => this.flush());
  }

  /** Commits every queued request in one transaction. Synchronous: nothing else runs meanwhile. */
  private flush(): void {
    this.scheduled = null;
    const batch = this.queue.splice(0, this.maxPerCommit);
    this.schedule();
    if (batch.length === 0) return;
    const outcomes: Array<{ ok: AppendResult } | { err: unknown }> = [];
    try {
      this.s.begin.run();
      try {
        for (const p of batch) {
          this.s.savepoint.run();
          try {
            outcomes.push({ ok: this.applyOne(p.req) });
            this.s.release.run();
          } catch (e) {
            this.s.rollbackTo.run();
            this.s.release.run();
            outcomes.push({ err: translateDbError(this.path, e) });
          }
        }
        this.s.commit.run();
      } catch (e) {
        this.rollbackQuietly();
        throw e;
      }
    } catch (e) {
      const err = translateDbError(this.path, e);
      for (const p of batch) p.reject(err);
      return;
    }
    this.stats.transactions += 1;
    this.stats.requests += batch.length;
    let wrote = false;
    batch.forEach((p, i) => {
      const o = outcomes[i]!;
      if ('ok' in o) {
        if (!o.ok.idempotent) {
          wrote = true;
          this.stats.events += o.ok.events.length;
        }
        p.resolve(o.ok);
      } else p.reject(o.err);
    });
    if (wrote) for (const s of this.subs) s.notify();
  }

  /** One request, inside the transaction and its savepoint. Throws to roll the savepoint back. */
  private applyOne(req: AppendRequest): AppendResult {
    const head = this.s.head.get(req.stream) as { revision: number; hash: Buffer } | undefined;
    const current = head ? head.revision : null;
    const ids = req.events.map((e) => e.id);
    const stored = ids.map((id) => this.s.byId.get(id) as StoredIdLocation | undefined);
    const plan = planAppend(req, current, stored, ids);
    if (plan.kind === 'idempotent') {
      const run = (this.s.range.all(req.stream, plan.firstRevision, plan.lastRevision) as Row[]).map(toRecorded);
      assertSameContent(req, run);
      return {
        stream: req.stream,
        nextExpectedRevision: plan.lastRevision,
        lastPosition: run[run.length - 1]!.position,
        idempotent: true,
        events: run,
      };
    }
    let position = this.s.nextPosition.get() as number;
    let revision = plan.firstRevision;
    let prev = head ? head.hash.toString('hex') : ZERO_HASH;
    const events: RecordedEvent[] = [];
    for (const p of req.events) {
      const input: SealInput = { type: p.type, data: p.data, stream: req.stream, revision, position, id: p.id, time: p.time, prev };
      const bytes = sealedBytes(req.seal(input), req.stream, revision);
      const hash = sha256(bytes);
      this.s.insert.run(position, req.stream, revision, p.id, p.type, bytes, hash);
      events.push({ position, stream: req.stream, revision, id: p.id, type: p.type, bytes, hash });
      prev = hash.toString('hex');
      position++;
      revision++;
    }
    const last = events[events.length - 1]!;
    return { stream: req.stream, nextExpectedRevision: last.revision, lastPosition: last.position, idempotent: false, events };
  }

  private guard<T>(f: () => T, whenClosed = true): T {
    if (whenClosed && this.closed) throw storeClosed(`ledger database ${this.path}`);
    try {
      return f();
    } catch (e) {
      throw translateDbError(this.path, e);
    }
  }

  async *readStream(stream: string, opts: ReadStreamOptions = {}): AsyncIterable<RecordedEvent> {
    let left = opts.maxCount ?? Number.POSITIVE_INFINITY;
    const backwards = opts.direction === 'backwards';
    let from = opts.fromRevision ?? (backwards ? Number.MAX_SAFE_INTEGER : 0);
    while (left > 0 && (backwards ? from >= 0 : true)) {
      const limit = Math.min(this.readBatch, left);
      const rows = this.guard(() => (backwards ? this.s.bwd : this.s.fwd).all(stream, from, limit) as Row[]);
      for (const r of rows) yield toRecorded(r);
      left -= rows.length;
      if (rows.length < limit) return;
      from = backwards ? rows[rows.length - 1]!.revision - 1 : rows[rows.length - 1]!.revision + 1;
    }
  }

  async *readAll(opts: ReadAllOptions = {}): AsyncIterable<RecordedEvent[]> {
    const batch = Math.max(1, opts.batchSize ?? 1000);
    let from = Math.max(0, opts.fromPosition ?? 0);
    // Without an end, read up to the size at the start, so a busy writer cannot keep the reader going forever.
    const end = opts.toPosition ?? this.guard(() => this.s.nextPosition.get() as number);
    while (from < end) {
      const rows = this.guard(() => this.s.all.all(from, end, batch) as Row[]);
      if (rows.length === 0) return;
      yield rows.map(toRecorded);
      from = rows[rows.length - 1]!.position + 1;
    }
  }

  async streamRevision(stream: string): Promise<number | null> {
    return this.guard(() => (this.s.revision.get(stream) as number | null) ?? null);
  }

  async size(): Promise<number> {
    return this.guard(() => this.s.nextPosition.get() as number);
  }

  subscribe(opts: SubscribeOptions): Subscription {
    let ended = false;
    // onEnded may run before the constructor returns (a source that fails at once): look `sub` up through a holder.
    const holder: { sub?: CatchUpSubscription } = {};
    const sub: CatchUpSubscription = this.guard(
      () =>
        new CatchUpSubscription(
          {
            readFrom: (position, limit) => this.guard(() => (this.s.all.all(position, Number.MAX_SAFE_INTEGER, limit) as Row[]).map(toRecorded), false),
            size: () => this.guard(() => this.s.nextPosition.get() as number, false),
          },
          opts,
          {
            pollMs: this.pollMs,
            batchSize: this.readBatch,
            onEnded: () => {
              ended = true;
              if (holder.sub) this.subs.delete(holder.sub);
            },
          },
        ),
    );
    holder.sub = sub;
    if (!ended) this.subs.add(sub);
    return sub;
  }

  /** Commits what is queued, stops subscriptions; later calls fail with LEDGER_STORE_CLOSED. The connection stays open. */
  async close(): Promise<void> {
    if (this.closed) return;
    if (this.scheduled !== null) clearImmediate(this.scheduled);
    this.scheduled = null;
    while (this.queue.length > 0) this.flush();
    this.closed = true;
    const subs = [...this.subs];
    this.subs.clear();
    await Promise.all(subs.map((s) => s.stop()));
  }

  /** Rolls back the open transaction, if any; a connection that is gone takes its transaction with it. */
  private rollbackQuietly(): void {
    if (!this.db.inTransaction) return;
    try {
      this.s.rollback.run();
    } catch {
      // the connection is gone; the transaction dies with it
    }
  }
}
