/**
 * The per-event checks that need no ledger-wide state, so they can run on worker threads: parse and
 * canonical form, stored columns against the envelope, stored hash, data schema, and the Ed25519 signature.
 * What needs order (positions, chains, key roles, the Merkle root) stays on the main thread.
 *
 * Chunks cross threads in a compact form: the envelopes as one transferred buffer with offsets, and per event
 * only 96 bytes back (prev, envelope hash, leaf hash), a signer index, and sparse lists of problems.
 */
import { CLAIM_EVENT_TYPES, eventDataProblem } from '../../domain/catalogue';
import { parseCommonCanonicalObject, parseEnvelope } from '../../domain/envelope';
import type { JsonObject } from '../../domain/json';
import { SCAN_META, jsKernels, type VerifyKernels } from '../../domain/verify-kernels';
import { nodeEd25519 } from '../../crypto/ed25519';

export type StepName = 'storage' | 'envelopes' | 'schemas' | 'signatures' | 'roles' | 'chains' | 'merkle' | 'checkpoints' | 'claims';

/** Types whose data the ordered pass needs: key events, and what claims are made of. */
const FOLDED_TYPES: ReadonlySet<string> = new Set(['KeyRegistered', 'KeyRevoked', ...CLAIM_EVENT_TYPES]);

export interface ChunkInput {
  positions: number[];
  streams: string[];
  revisions: number[];
  ids: string[];
  types: string[];
  /** All envelopes' wire bytes, concatenated; event i is bytes[offsets[i], offsets[i+1]). */
  bytes: Uint8Array;
  offsets: Uint32Array;
  /** Stored hashes, 32 bytes each. */
  hashes: Uint8Array;
  /** signer -> 32-byte public key, for every key registered up to the end of this chunk. */
  keys: Array<[string, Uint8Array]>;
  /**
   * Sparse: rows whose stored values are not of the storage class the schema declares (a `bytes` cell stored as
   * TEXT, a REAL revision, a NULL): packed as empty placeholders, reported as VERIFY_COLUMN_TYPE.
   */
  columnProblems?: Array<{ i: number; message: string }>;
}

export const DIGEST_STRIDE = 96;

export interface ChunkOutput {
  /** Per event: prev (32 bytes) | SHA-256 of the wire bytes (32) | RFC 9162 leaf hash (32). */
  digests: Uint8Array;
  /** Per event: index into `signers`. */
  signerIndex: Uint32Array;
  signers: string[];
  /** Sparse: events that failed a check. */
  problems: Array<{ i: number; step: StepName; code: string; message: string }>;
  /** Sparse: events whose signer's key the checker did not have (the main thread decides). */
  unknownSigner: number[];
  /**
   * Sparse: data of the events the main thread folds: key events (into the key registry) and the events claims
   * are made of (CLAIM_EVENT_TYPES, into the claims step's rules).
   */
  dataEvents: Array<{ i: number; data: JsonObject }>;
  /**
   * Per event: its id (a lowercase UUID, the envelope's and the row's) as 4 big-endian 32-bit words, for the ordered
   * pass's check that ids are unique in the whole log; zeros for an event that failed a check here.
   */
  idWords: Uint32Array;
}

/**
 * What the ordered pass needs of a chunk a worker read by itself (the rows never reach the main thread): positions,
 * revisions, and stream and type names interned per chunk. Past the checks, these equal the signed envelopes' fields.
 */
export interface ChunkMeta {
  positions: Float64Array;
  revisions: Float64Array;
  streams: string[];
  streamIndex: Uint32Array;
  types: string[];
  typeIndex: Uint32Array;
}

function intern(values: readonly string[]): { table: string[]; index: Uint32Array } {
  const table: string[] = [];
  const ids = new Map<string, number>();
  const index = new Uint32Array(values.length);
  for (let i = 0; i < values.length; i++) {
    const v = values[i] as string;
    let k = ids.get(v);
    if (k === undefined) {
      k = table.push(v) - 1;
      ids.set(v, k);
    }
    index[i] = k;
  }
  return { table, index };
}

/** Reads events [from, to) as rows (a store's own reader; the SQLite one is adapters/sqlite/sqlite-range-reader.ts). */
export interface RowReader {
  rawRange(from: number, to: number): ReadonlyArray<PackedRow>;
  /** Stored bytes of every KeyRegistered event, in position order (unverified: a hint for the signature checks). */
  keyRegistrations(): ReadonlyArray<{ position: number; bytes: Uint8Array }>;
  close(): void;
}

/** Reads and checks events [from, to): what a verification worker does for a `range` request, on any thread. */
export function checkRange(
  reader: RowReader,
  from: number,
  to: number,
  keys: Array<[string, Uint8Array]>,
  keyCache: Map<string, Uint8Array>,
  kernels: VerifyKernels,
): { out: ChunkOutput; meta: ChunkMeta } {
  const input = packRows(reader.rawRange(from, to), keys);
  return { out: checkChunk(input, keyCache, kernels), meta: chunkMeta(input) };
}

export function chunkMeta(input: ChunkInput): ChunkMeta {
  const streams = intern(input.streams);
  const types = intern(input.types);
  return {
    positions: Float64Array.from(input.positions),
    revisions: Float64Array.from(input.revisions),
    streams: streams.table,
    streamIndex: streams.index,
    types: types.table,
    typeIndex: types.index,
  };
}

export function eventBytes(input: Pick<ChunkInput, 'bytes' | 'offsets'>, i: number): Buffer {
  const b = input.bytes;
  return Buffer.from(b.buffer, b.byteOffset + (input.offsets[i] as number), (input.offsets[i + 1] as number) - (input.offsets[i] as number));
}

type PackedEvent = { position: number; stream: string; revision: number; id: string; type: string; bytes: Uint8Array; hash: Uint8Array };
/** An event as a tuple, the order of PackedEvent's fields (what a store reads in bulk without an object per row). */
export type PackedRow = readonly [position: number, stream: string, revision: number, id: string, type: string, bytes: Uint8Array, hash: Uint8Array];

/** Packs recorded events into a chunk (one buffer for all bytes, so it can be transferred, not copied). */
export function packChunk(events: ReadonlyArray<PackedEvent>, keys: Array<[string, Uint8Array]>): ChunkInput {
  return packRows(
    events.map((e): PackedRow => [e.position, e.stream, e.revision, e.id, e.type, e.bytes, e.hash]),
    keys,
  );
}

const EMPTY_BYTES = new Uint8Array(0);
const ZERO_HASH32 = new Uint8Array(32);

/**
 * Why a row's stored values are not what the `events` table declares (INTEGER position and revision, TEXT stream, id
 * and type, BLOB bytes, a 32-byte BLOB hash), or null. SQLite keeps a value of another storage class where the
 * column's affinity cannot convert it (a TEXT `bytes` cell, a REAL revision), so a reader must not assume the types.
 */
function rowTypeProblem(r: PackedRow): string | null {
  const [position, stream, revision, id, type, bytes, hash] = r as readonly unknown[];
  const cls = (v: unknown): string =>
    v === null
      ? 'NULL'
      : v instanceof Uint8Array
        ? 'BLOB'
        : typeof v === 'string'
          ? 'TEXT'
          : typeof v === 'number'
            ? Number.isInteger(v)
              ? 'INTEGER'
              : 'REAL'
            : typeof v;
  const where = `the row at position ${String(position)}`;
  if (typeof position !== 'number' || !Number.isSafeInteger(position)) return `${where}: position is ${cls(position)}, not an INTEGER`;
  if (typeof revision !== 'number' || !Number.isSafeInteger(revision)) return `${where}: revision is ${cls(revision)}, not an INTEGER`;
  if (typeof stream !== 'string') return `${where}: stream is ${cls(stream)}, not TEXT`;
  if (typeof id !== 'string') return `${where}: id is ${cls(id)}, not TEXT`;
  if (typeof type !== 'string') return `${where}: type is ${cls(type)}, not TEXT`;
  if (!(bytes instanceof Uint8Array)) return `${where}: bytes is ${cls(bytes)}, not a BLOB (the wire bytes)`;
  if (!(hash instanceof Uint8Array)) return `${where}: hash is ${cls(hash)}, not a BLOB`;
  return null;
}

/** packChunk for rows read as tuples. */
export function packRows(rows: ReadonlyArray<PackedRow>, keys: Array<[string, Uint8Array]>): ChunkInput {
  const n = rows.length;
  let columnProblems: Array<{ i: number; message: string }> | undefined;
  let packed = rows;
  for (let i = 0; i < n; i++) {
    const r = rows[i] as PackedRow;
    // The common case costs a few typeof checks; a bad row is replaced by a placeholder and reported in order.
    if (
      typeof r[0] === 'number' &&
      typeof r[1] === 'string' &&
      typeof r[2] === 'number' &&
      typeof r[3] === 'string' &&
      typeof r[4] === 'string' &&
      r[5] instanceof Uint8Array &&
      r[6] instanceof Uint8Array &&
      Number.isSafeInteger(r[0]) &&
      Number.isSafeInteger(r[2])
    )
      continue;
    const message = rowTypeProblem(r);
    if (message === null) continue;
    if (packed === rows) packed = rows.slice();
    (columnProblems ??= []).push({ i, message });
    const position = typeof r[0] === 'number' ? r[0] : Number.NaN;
    (packed as PackedRow[])[i] = [position, '', 0, '', '', EMPTY_BYTES, ZERO_HASH32];
  }
  const input = packValidRows(packed, keys);
  if (columnProblems) input.columnProblems = columnProblems;
  return input;
}

function packValidRows(rows: ReadonlyArray<PackedRow>, keys: Array<[string, Uint8Array]>): ChunkInput {
  const n = rows.length;
  const offsets = new Uint32Array(n + 1);
  let total = 0;
  for (let i = 0; i < n; i++) {
    offsets[i] = total;
    total += (rows[i] as PackedRow)[5].byteLength;
  }
  offsets[n] = total;
  const bytes = new Uint8Array(total);
  const hashes = new Uint8Array(32 * n);
  const positions = new Array<number>(n);
  const streams = new Array<string>(n);
  const revisions = new Array<number>(n);
  const ids = new Array<string>(n);
  const types = new Array<string>(n);
  for (let i = 0; i < n; i++) {
    const [position, stream, revision, id, type, b, hash] = rows[i] as PackedRow;
    bytes.set(b, offsets[i] as number);
    if (hash.byteLength === 32) hashes.set(hash, 32 * i);
    positions[i] = position;
    streams[i] = stream;
    revisions[i] = revision;
    ids[i] = id;
    types[i] = type;
  }
  return { positions, streams, revisions, ids, types, bytes, offsets, hashes, keys };
}

// The kernels' types and JavaScript kernels are domain code (domain/verify-kernels.ts); named here as well for the
// verification modules that take them with the rest of this file.
export {
  SCAN_META,
  jsDigestAll,
  jsKernels,
  jsSubtreeRoot,
  type DigestAll,
  type ScanEnvelopes,
  type SubtreeRoot,
  type VerifyKernels,
} from '../../domain/verify-kernels';

const SIG_MEMBER_BYTES = 97;

/** What the checks need of an envelope, from parseEnvelope or from the scan. */
export interface EnvelopeFields {
  position: number;
  revision: number;
  stream: string;
  id: string;
  type: string;
  signer: string;
  data: JsonObject;
  dataBytes: number;
  signing: Buffer;
  signature: Buffer;
}

/**
 * The envelopes of a chunk, hashed (envelope hash and leaf hash at 32 and 64 of each event's DIGEST_STRIDE bytes of
 * `digests`) and parsed, each into its fields (and its `prev` at 0 of its digest bytes) or the problem
 * parseEnvelope names. With the addon's scan, events in the common layout are cut in C and the rest go through
 * parseEnvelope; tests/ledger/envelope-scan.int.spec.ts holds the result equal to parseEnvelope's for every event.
 */
export function readEnvelopes(input: ChunkInput, kernels: VerifyKernels, digests: Uint8Array): Array<EnvelopeFields | { code: string; message: string }> {
  const n = input.positions.length;
  // A Buffer view for hex writes without copies.
  const d = Buffer.from(digests.buffer, digests.byteOffset, digests.byteLength);
  kernels.digestAll(input.bytes, input.offsets, digests, DIGEST_STRIDE, 32);
  let scan: { meta: Float64Array; sigs: Buffer; signing: Buffer; bytes: Buffer } | null = null;
  if (kernels.scanEnvelopes) {
    const meta = new Float64Array(SCAN_META * n);
    const sigs = Buffer.allocUnsafeSlow(64 * n);
    const signing = Buffer.allocUnsafeSlow(input.bytes.byteLength);
    if (kernels.scanEnvelopes(input.bytes, input.offsets, meta, sigs, signing, digests, DIGEST_STRIDE, 0) > 0)
      scan = { meta, sigs, signing, bytes: Buffer.from(input.bytes.buffer, input.bytes.byteOffset, input.bytes.byteLength) };
  }
  const events = new Array<EnvelopeFields | { code: string; message: string }>(n);
  for (let i = 0; i < n; i++) {
    const fast = scan ? scanned(scan, input.offsets, i) : null;
    if (fast) {
      events[i] = fast;
      continue;
    }
    const position = input.positions[i] as number;
    try {
      const parsed = parseEnvelope(eventBytes(input, i), { position });
      events[i] = { ...parsed.envelope, dataBytes: parsed.dataBytes, signing: parsed.signing, signature: parsed.signature };
      d.write(parsed.envelope.prev, DIGEST_STRIDE * i, 32, 'hex');
    } catch (e) {
      const err = e as { code?: string; message: string };
      events[i] = { code: err.code ?? 'ENVELOPE_MALFORMED', message: `position ${position}: ${err.message}` };
      d.fill(0, DIGEST_STRIDE * i, DIGEST_STRIDE * i + 32); // a `prev` the scan may have written: none, as without it
    }
  }
  return events;
}

const HEX_VALUE = new Int8Array(128).fill(-1);
for (let c = 0; c < 16; c++) HEX_VALUE['0123456789abcdef'.charCodeAt(c)] = c;

/**
 * Writes a lowercase UUID (`8-4-4-4-12` hex digits, as the envelope check requires) as 4 big-endian 32-bit words at
 * out[at..at+4): the 128 bits, so two ids are equal exactly when their words are.
 */
export function uuidWords(id: string, out: Uint32Array, at: number): void {
  let w = 0;
  let bits = 0;
  let k = at;
  for (let j = 0; j < id.length; j++) {
    const c = id.charCodeAt(j);
    if (c === 45) continue; // '-'
    w = ((w << 4) | (HEX_VALUE[c] as number)) >>> 0;
    bits += 4;
    if (bits === 32) {
      out[k++] = w;
      w = 0;
      bits = 0;
    }
  }
}

/**
 * Three passes over the chunk: the digests and the envelopes (readEnvelopes), then everything but the signatures
 * (columns, stored hash, schema), then the signatures in one tight loop, which keeps OpenSSL's code and tables hot in
 * the cache the way a bare verify loop does (measurably faster than interleaving the JSON work with each verify).
 */
export function checkChunk(input: ChunkInput, keyCache: Map<string, Uint8Array>, kernels: VerifyKernels = jsKernels): ChunkOutput {
  for (const [signer, key] of input.keys) keyCache.set(signer, key);
  const n = input.positions.length;
  const digests = new Uint8Array(DIGEST_STRIDE * n);
  const d = Buffer.from(digests.buffer, digests.byteOffset, digests.byteLength);
  const stored = Buffer.from(input.hashes.buffer, input.hashes.byteOffset, input.hashes.byteLength);
  const envelopes = readEnvelopes(input, kernels, digests);
  const signerIndex = new Uint32Array(n);
  const signers: string[] = [];
  const signerIds = new Map<string, number>();
  const out: ChunkOutput = { digests, signerIndex, signers, problems: [], unknownSigner: [], dataEvents: [], idWords: new Uint32Array(4 * n) };
  const columnProblems = input.columnProblems ? new Map(input.columnProblems.map((p) => [p.i, p.message])) : null;
  const toVerify: Array<{ i: number; key: Uint8Array; signing: Buffer; signature: Buffer; signer: string }> = [];
  for (let i = 0; i < n; i++) {
    const position = input.positions[i] as number;
    const env = envelopes[i] as EnvelopeFields | { code: string; message: string };
    const columnProblem = columnProblems?.get(i);
    if (columnProblem !== undefined) {
      out.problems.push({ i, step: 'envelopes', code: 'VERIFY_COLUMN_TYPE', message: columnProblem });
      continue;
    }
    if (!('signing' in env)) {
      out.problems.push({ i, step: 'envelopes', code: env.code, message: env.message });
      continue;
    }
    let si = signerIds.get(env.signer);
    if (si === undefined) {
      si = signers.push(env.signer) - 1;
      signerIds.set(env.signer, si);
    }
    signerIndex[i] = si;
    if (FOLDED_TYPES.has(env.type)) out.dataEvents.push({ i, data: env.data });
    if (
      env.position !== position ||
      env.stream !== input.streams[i] ||
      env.revision !== input.revisions[i] ||
      env.id !== input.ids[i] ||
      env.type !== input.types[i]
    ) {
      out.problems.push({
        i,
        step: 'envelopes',
        code: 'VERIFY_COLUMN_MISMATCH',
        message: `stored at position ${position} as ${input.streams[i]}@${input.revisions[i]}, ${input.types[i]} ${input.ids[i]}, but the signed envelope says position ${env.position}, ${env.stream}@${env.revision}, ${env.type} ${env.id}`,
      });
      continue;
    }
    if (d.compare(stored, 32 * i, 32 * i + 32, DIGEST_STRIDE * i + 32, DIGEST_STRIDE * i + 64) !== 0) {
      out.problems.push({
        i,
        step: 'envelopes',
        code: 'VERIFY_HASH_MISMATCH',
        message: `the stored hash of position ${position} is not the SHA-256 of its bytes`,
      });
      continue;
    }
    const dp = eventDataProblem(env.type, env.data, env.dataBytes);
    if (dp) {
      out.problems.push({ i, step: 'schemas', code: dp.code.replace(/^LEDGER_/, 'VERIFY_'), message: dp.message });
      continue;
    }
    uuidWords(env.id, out.idWords, 4 * i);
    const key = keyCache.get(env.signer);
    if (!key) {
      out.unknownSigner.push(i);
      continue;
    }
    toVerify.push({ i, key, signing: env.signing, signature: env.signature, signer: env.signer });
  }
  for (const v of toVerify) {
    if (!nodeEd25519.verify(v.key, v.signing, v.signature))
      out.problems.push({
        i: v.i,
        step: 'signatures',
        code: 'VERIFY_BAD_SIGNATURE',
        message: `the signature of position ${input.positions[v.i]} does not verify with ${v.signer}`,
      });
  }
  // Problems in event order, so the first one reported is the first bad event.
  out.problems.sort((a, b) => a.i - b.i);
  return out;
}

/**
 * The fields of a scanned event i, or null when the scan left it to parseEnvelope or its data is not in the common
 * canonical shape (parseEnvelope then decides, and names any problem).
 */
function scanned(scan: { meta: Float64Array; sigs: Buffer; signing: Buffer; bytes: Buffer }, offsets: Uint32Array, i: number): EnvelopeFields | null {
  const m = scan.meta;
  const b = SCAN_META * i;
  if (m[b] !== 1) return null;
  const at = offsets[i] as number;
  const len = (offsets[i + 1] as number) - at;
  const bytes = scan.bytes;
  const dataEnd = m[b + 1] as number;
  // All ASCII (the scan checked), so latin1 is the UTF-8 text.
  const dataText = bytes.toString('latin1', at + 8, at + dataEnd);
  const data = parseCommonCanonicalObject(dataText);
  if (!data) return null;
  const text = (from: number, length: number): string => bytes.toString('latin1', at + from, at + from + length);
  return {
    position: m[b + 2] as number,
    revision: m[b + 3] as number,
    signer: text(m[b + 4] as number, m[b + 5] as number),
    stream: text(m[b + 6] as number, m[b + 7] as number),
    type: text(m[b + 8] as number, m[b + 9] as number),
    id: text(dataEnd + 7, 36),
    data,
    dataBytes: dataText.length,
    signing: scan.signing.subarray(at, at + len - SIG_MEMBER_BYTES),
    signature: scan.sigs.subarray(64 * i, 64 * i + 64),
  };
}
