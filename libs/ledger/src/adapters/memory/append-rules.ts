/**
 * The append rules of the EventStore port (EventStoreDB semantics), as pure functions shared by the memory and the
 * SQLite adapters so both decide every append identically. No I/O: the adapter passes in what it read.
 */
import { EVENT_TYPE_RE, STREAM_RE, UUID_RE } from '../../domain/envelope';
import { canonicalJson } from '../../domain/jcs';
import type { AppendRequest, ExpectedRevision, RecordedEvent } from '../../ports/event-store.port';
import { duplicateEventId, eventIdConflict, invalidAppend, wrongExpectedRevision } from '../../ports/event-store.errors';

/** Most events one append may carry. */
export const MAX_EVENTS_PER_APPEND = 10_000;

/** Where an already-stored event id lives. */
export interface StoredIdLocation {
  stream: string;
  revision: number;
}

export type AppendPlan =
  /** Every id is already stored as this exact run: nothing to write; the run spans [firstRevision, lastRevision]. */
  | { kind: 'idempotent'; firstRevision: number; lastRevision: number }
  /** New events get revisions firstRevision, firstRevision + 1, ... */
  | { kind: 'write'; firstRevision: number };

function isExpectedRevision(e: unknown): e is ExpectedRevision {
  return e === 'any' || e === 'no_stream' || e === 'stream_exists' || (Number.isSafeInteger(e) && (e as number) >= 0);
}

/** Shape checks that need no stored state. Throws `LEDGER_INVALID_APPEND`. */
export function validateAppendRequest(req: AppendRequest): void {
  if (typeof req !== 'object' || req === null) throw invalidAppend('append request must be an object', {});
  const { stream, expected, events, seal } = req;
  if (typeof stream !== 'string' || !STREAM_RE.test(stream)) throw invalidAppend(`stream name ${JSON.stringify(stream)} must be <category>-<id>`, { stream });
  if (!isExpectedRevision(expected))
    throw invalidAppend(`stream ${stream}: expected revision must be any, no_stream, stream_exists or an integer >= 0`, { stream, expected });
  if (typeof seal !== 'function') throw invalidAppend(`stream ${stream}: seal must be a function`, { stream });
  if (!Array.isArray(events) || events.length === 0) throw invalidAppend(`stream ${stream}: an append needs at least one event`, { stream });
  if (events.length > MAX_EVENTS_PER_APPEND)
    throw invalidAppend(`stream ${stream}: ${events.length} events in one append, above ${MAX_EVENTS_PER_APPEND}`, {
      stream,
      count: events.length,
    });
  const seen = new Set<string>();
  events.forEach((e, i) => {
    if (typeof e !== 'object' || e === null) throw invalidAppend(`stream ${stream}: event ${i} is not an object`, { stream, index: i });
    if (typeof e.id !== 'string' || !UUID_RE.test(e.id))
      throw invalidAppend(`stream ${stream}: event ${i} id ${JSON.stringify(e.id)} is not a lowercase UUID`, {
        stream,
        index: i,
      });
    if (typeof e.type !== 'string' || !EVENT_TYPE_RE.test(e.type))
      throw invalidAppend(`stream ${stream}: event ${i} type ${JSON.stringify(e.type)} is not a valid event type`, {
        stream,
        index: i,
      });
    if (seen.has(e.id)) throw invalidAppend(`stream ${stream}: event id ${e.id} appears twice in one append`, { stream, id: e.id });
    seen.add(e.id);
  });
}

/**
 * Decides an append from the stream's current revision (null: no stream) and where each proposed id is already
 * stored (undefined: not stored), in request order.
 * - an id stored in another stream: `LEDGER_DUPLICATE_EVENT_ID`;
 * - every id stored, as a contiguous run of this stream in request order, at the place the expected revision
 *   names (anywhere for any / stream_exists, from 0 for no_stream, from n + 1 for n): idempotent;
 * - some ids stored, or all stored elsewhere than that: `LEDGER_WRONG_EXPECTED_REVISION`;
 * - none stored: the expected revision must match the stream.
 */
export function planAppend(
  req: Pick<AppendRequest, 'stream' | 'expected'>,
  current: number | null,
  stored: ReadonlyArray<StoredIdLocation | undefined>,
  ids: readonly string[],
): AppendPlan {
  const { stream, expected } = req;
  let present = 0;
  for (let i = 0; i < stored.length; i++) {
    const s = stored[i];
    if (s === undefined) continue;
    if (s.stream !== stream) throw duplicateEventId(ids[i] ?? '', stream, s.stream);
    present++;
  }
  if (present === 0) {
    const ok =
      expected === 'any' ||
      (expected === 'no_stream' && current === null) ||
      (expected === 'stream_exists' && current !== null) ||
      (typeof expected === 'number' && current === expected);
    if (!ok) throw wrongExpectedRevision(stream, expected, current);
    return { kind: 'write', firstRevision: current === null ? 0 : current + 1 };
  }
  if (present === stored.length) {
    const first = stored[0]!.revision;
    const contiguous = stored.every((s, i) => s!.revision === first + i);
    const placed =
      expected === 'any' ||
      expected === 'stream_exists' ||
      (expected === 'no_stream' && first === 0) ||
      (typeof expected === 'number' && first === expected + 1);
    if (contiguous && placed) return { kind: 'idempotent', firstRevision: first, lastRevision: first + stored.length - 1 };
  }
  throw wrongExpectedRevision(stream, expected, current);
}

/**
 * An idempotent retry must re-send the very events stored: same type and same data (compared in canonical form) as
 * the stored run, in order. Otherwise `LEDGER_EVENT_ID_CONFLICT` (conflict): the id names an event already recorded
 * with other content, and silently answering "already recorded" would drop the new data. Stored bytes that are not an
 * envelope with a `data` object (only test seals write such) are compared by type alone.
 */
export function assertSameContent(req: Pick<AppendRequest, 'stream' | 'events'>, run: readonly RecordedEvent[]): void {
  req.events.forEach((p, i) => {
    const stored = run[i];
    if (!stored) return;
    if (stored.type !== p.type) throw eventIdConflict(p.id, req.stream, stored.revision, stored.position, 'type');
    let data: unknown;
    try {
      data = (JSON.parse(Buffer.from(stored.bytes).toString('utf8')) as { data?: unknown }).data;
    } catch {
      return;
    }
    if (typeof data !== 'object' || data === null) return;
    let same: boolean;
    try {
      same = canonicalJson(data as never) === canonicalJson(p.data);
    } catch {
      same = false;
    }
    if (!same) throw eventIdConflict(p.id, req.stream, stored.revision, stored.position, 'data');
  });
}

/** Checks what a seal returned and takes a private copy (the caller may reuse its buffer). */
export function sealedBytes(out: unknown, stream: string, revision: number): Buffer {
  if (!(out instanceof Uint8Array) || out.byteLength === 0)
    throw invalidAppend(`stream ${stream}: the seal returned no bytes for revision ${revision}`, { stream, revision });
  return Buffer.from(out);
}
