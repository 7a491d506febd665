/**
 * In-memory EventStore, for unit tests only. Same append rules (append-rules.ts), same subscription delivery
 * (catch-up-subscription.ts) and the same contract suite as the SQLite adapter.
 */
import { ZERO_HASH, sha256 } from '../../domain/envelope';
import type {
  AppendRequest,
  AppendResult,
  EventStore,
  ReadAllOptions,
  ReadStreamOptions,
  RecordedEvent,
  SealInput,
  SubscribeOptions,
  Subscription,
} from '../../ports/event-store.port';
import { atRequest, storeClosed } from '../../ports/event-store.errors';
import { assertSameContent, planAppend, sealedBytes, validateAppendRequest } from './append-rules';
import { CatchUpSubscription } from './catch-up-subscription';

/** Bytes handed out are copies, so callers cannot change what the store holds (as with a real database). */
function copy(e: RecordedEvent): RecordedEvent {
  return { ...e, bytes: Buffer.from(e.bytes), hash: Buffer.from(e.hash) };
}

export class MemoryEventStore implements EventStore {
  private readonly log: RecordedEvent[] = [];
  private readonly streams = new Map<string, RecordedEvent[]>();
  private readonly byId = new Map<string, RecordedEvent>();
  private readonly subs = new Set<CatchUpSubscription>();
  private closed = false;

  async append(req: AppendRequest): Promise<AppendResult> {
    return this.appendNow(req);
  }

  /** All requests or none (see EventStore.appendMany): applied in order, undone on the first failure. */
  async appendMany(reqs: AppendRequest[]): Promise<AppendResult[]> {
    const start = this.log.length;
    const out: AppendResult[] = [];
    for (const [i, req] of reqs.entries()) {
      try {
        out.push(this.appendNow(req));
      } catch (e) {
        for (const ev of this.log.splice(start)) {
          this.byId.delete(ev.id);
          const stream = this.streams.get(ev.stream)!;
          stream.pop();
          if (stream.length === 0) this.streams.delete(ev.stream);
        }
        throw atRequest(e, i);
      }
    }
    return out;
  }

  private appendNow(req: AppendRequest): AppendResult {
    if (this.closed) throw storeClosed('memory event store');
    validateAppendRequest(req);
    const existing = this.streams.get(req.stream);
    const current = existing ? existing.length - 1 : null;
    const ids = req.events.map((e) => e.id);
    const plan = planAppend(
      req,
      current,
      ids.map((id) => this.byId.get(id)),
      ids,
    );
    if (plan.kind === 'idempotent') {
      const run = existing!.slice(plan.firstRevision, plan.lastRevision + 1).map(copy);
      assertSameContent(req, run);
      return {
        stream: req.stream,
        nextExpectedRevision: plan.lastRevision,
        lastPosition: run[run.length - 1]!.position,
        idempotent: true,
        events: run,
      };
    }
    // Build everything first; a seal that throws leaves nothing stored.
    const fresh: RecordedEvent[] = [];
    let prev = current === null ? ZERO_HASH : Buffer.from(existing![current]!.hash).toString('hex');
    let position = this.log.length;
    let revision = plan.firstRevision;
    for (const p of req.events) {
      const input: SealInput = {
        type: p.type,
        data: p.data,
        stream: req.stream,
        revision,
        position,
        id: p.id,
        time: p.time,
        prev,
      };
      const bytes = sealedBytes(req.seal(input), req.stream, revision);
      const hash = sha256(bytes);
      fresh.push({ position, stream: req.stream, revision, id: p.id, type: p.type, bytes, hash });
      prev = hash.toString('hex');
      position++;
      revision++;
    }
    const stream = existing ?? [];
    for (const e of fresh) {
      this.log.push(e);
      stream.push(e);
      this.byId.set(e.id, e);
    }
    this.streams.set(req.stream, stream);
    for (const s of this.subs) s.notify();
    const last = fresh[fresh.length - 1]!;
    return {
      stream: req.stream,
      nextExpectedRevision: last.revision,
      lastPosition: last.position,
      idempotent: false,
      events: fresh.map(copy),
    };
  }

  async *readStream(stream: string, opts: ReadStreamOptions = {}): AsyncIterable<RecordedEvent> {
    const events = this.streams.get(stream);
    if (!events || events.length === 0) return;
    const max = opts.maxCount ?? Number.POSITIVE_INFINITY;
    let n = 0;
    if ((opts.direction ?? 'forwards') === 'forwards') {
      for (let r = Math.max(0, opts.fromRevision ?? 0); r < events.length && n < max; r++, n++) yield copy(events[r]!);
    } else {
      for (let r = Math.min(events.length - 1, opts.fromRevision ?? events.length - 1); r >= 0 && n < max; r--, n++) yield copy(events[r]!);
    }
  }

  async *readAll(opts: ReadAllOptions = {}): AsyncIterable<RecordedEvent[]> {
    const batch = Math.max(1, opts.batchSize ?? 1000);
    const end = Math.min(opts.toPosition ?? this.log.length, this.log.length);
    for (let p = Math.max(0, opts.fromPosition ?? 0); p < end; p += batch) {
      yield this.log.slice(p, Math.min(p + batch, end)).map(copy);
    }
  }

  async streamRevision(stream: string): Promise<number | null> {
    const events = this.streams.get(stream);
    return events && events.length > 0 ? events.length - 1 : null;
  }

  async size(): Promise<number> {
    return this.log.length;
  }

  /** Synchronous reads, for MemoryLedgerLock (the SQLite lock reads its own connection). */
  sizeNow(): number {
    return this.log.length;
  }

  readRange(from: number, to: number): RecordedEvent[] {
    return this.log.slice(Math.max(0, from), Math.max(0, to)).map(copy);
  }

  subscribe(opts: SubscribeOptions): Subscription {
    if (this.closed) throw storeClosed('memory event store');
    const ended = { value: false };
    // onEnded may run before the constructor returns: look `sub` up through a holder.
    const holder: { sub?: CatchUpSubscription } = {};
    const sub: CatchUpSubscription = new CatchUpSubscription(
      {
        readFrom: (position, limit) => this.log.slice(position, position + limit).map(copy),
        size: () => this.log.length,
      },
      opts,
      {
        onEnded: () => {
          ended.value = true;
          if (holder.sub) this.subs.delete(holder.sub);
        },
      },
    );
    holder.sub = sub;
    if (!ended.value) this.subs.add(sub);
    return sub;
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.subs].map((s) => s.stop()));
    this.subs.clear();
  }
}
