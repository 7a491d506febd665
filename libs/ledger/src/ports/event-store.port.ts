/**
 * The EventStore port: an append-only log of signed envelopes with EventStoreDB append semantics.
 * Adapters: memory (unit tests), SQLite (embedded default), EventStoreDB/KurrentDB (clustered).
 * One contract suite (tests/contract/event-store.contract.ts) runs against every adapter.
 */
import type { JsonObject } from '../domain/json';
import type { UnsignedEnvelope } from '../domain/envelope';

/** `any`, `no_stream` (stream must not exist), `stream_exists`, or the revision of the stream's last event. */
export type ExpectedRevision = 'any' | 'no_stream' | 'stream_exists' | number;

/** An event as proposed by a writer, before positions, chain link and signature are fixed. */
export interface ProposedEvent {
  /** UUID, the idempotency key. */
  id: string;
  type: string;
  data: JsonObject;
  /** RFC 3339 UTC with milliseconds, from the writer's injected clock. */
  time: string;
}

/** What the store fixes for each new event before it is signed: everything but `signer` and `sig`. */
export type SealInput = Omit<UnsignedEnvelope, 'signer'>;

/**
 * Turns an event whose revision, position and prev the store has fixed into its wire bytes (the sealer adds
 * `signer` and `sig`). Called inside the store's write critical section, in order, once per new event. It may
 * throw; then the whole append fails and nothing is stored.
 */
export type Seal = (input: SealInput) => Uint8Array;

export interface RecordedEvent {
  position: number;
  stream: string;
  revision: number;
  id: string;
  type: string;
  /** The exact wire bytes (canonical JSON of the signed envelope). */
  bytes: Uint8Array;
  /** SHA-256 of `bytes`. */
  hash: Uint8Array;
}

export interface AppendRequest {
  stream: string;
  expected: ExpectedRevision;
  events: ProposedEvent[];
  seal: Seal;
}

export interface AppendResult {
  stream: string;
  /** Revision of the stream's last event after the append (the next `expected` for this writer). */
  nextExpectedRevision: number;
  /** Global position of the last event of this append. */
  lastPosition: number;
  /** True when every event id was already stored as this exact run of the stream: nothing new was written. */
  idempotent: boolean;
  events: RecordedEvent[];
}

export interface ReadStreamOptions {
  fromRevision?: number;
  maxCount?: number;
  direction?: 'forwards' | 'backwards';
}

export interface ReadAllOptions {
  fromPosition?: number;
  /** Exclusive. */
  toPosition?: number;
  /** Events per yielded batch (adapters may yield fewer). */
  batchSize?: number;
}

export interface Subscription {
  /** Resolves once the subscriber has been handed every event that existed when it started. */
  readonly caughtUp: Promise<void>;
  stop(): Promise<void>;
}

export interface SubscribeOptions {
  fromPosition?: number;
  /** Called with each event in global order, never concurrently; a rejection stops the subscription. */
  onEvent: (e: RecordedEvent) => void | Promise<void>;
  onError?: (err: unknown) => void;
}

/**
 * How another thread can read this store's events by itself (parallel verification reads on its worker threads
 * instead of shipping every row across). `sqlite`: a read-only connection to the file at `path`.
 */
export type ParallelReadSpec = { kind: 'sqlite'; path: string };

export interface EventStore {
  /**
   * Appends atomically: all events or none.
   * - expected revision mismatch: `LEDGER_WRONG_EXPECTED_REVISION` (kind conflict);
   * - retry of the same event ids as a contiguous run already in this stream: success, `idempotent: true`, nothing new;
   * - some but not all ids already stored (partial overlap): `LEDGER_WRONG_EXPECTED_REVISION`;
   * - an id already stored in another stream: `LEDGER_DUPLICATE_EVENT_ID` (kind conflict).
   * Of concurrent appends with the same expected revision exactly one wins.
   */
  append(req: AppendRequest): Promise<AppendResult>;
  /**
   * Optional: appends several requests (any streams) in order, all or none, in one write transaction: each request is
   * decided as `append` would decide it (idempotent retries included) against the state the earlier ones left. The
   * first failure undoes every request of the call and rejects with that request's error, its details gaining
   * `index` (of the request). `onProgress(done)` is called now and then with the number of requests applied.
   */
  appendMany?(reqs: AppendRequest[], onProgress?: (done: number) => void): Promise<AppendResult[]>;
  /** Events of one stream; a stream that does not exist yields nothing. */
  readStream(stream: string, opts?: ReadStreamOptions): AsyncIterable<RecordedEvent>;
  /** All events in global position order, in batches. */
  readAll(opts?: ReadAllOptions): AsyncIterable<RecordedEvent[]>;
  /** Revision of the stream's last event, or null when the stream does not exist. */
  streamRevision(stream: string): Promise<number | null>;
  /** Number of events in the log (= the next global position). */
  size(): Promise<number>;
  /** Optional: how other threads can read the events themselves; absent or null when they cannot (in-memory). */
  parallelReadSpec?(): ParallelReadSpec | null;
  /** Catch-up subscription over all events from a position, then live. */
  subscribe(opts: SubscribeOptions): Subscription;
  close(): Promise<void>;
}
