/**
 * The per-event checks that need no ledger-wide state, so they can run on worker threads: parse and
 * canonical form, stored columns against the envelope, stored hash, data schema, and the Ed25519 signature.
 * What needs order (positions, chains, key roles, the Merkle root) stays on the main thread.
 *
 * Chunks cross threads in a compact form: the envelopes as one transferred buffer with offsets, and per event
 * only 96 bytes back (prev, envelope hash, leaf hash), a signer index, and sparse lists of problems.
 */
import { eventDataProblem } from '../../domain/catalogue';
import { parseEnvelope, sha256 } from '../../domain/envelope';
import type { JsonObject } from '../../domain/json';
import { leafHash } from '../../domain/merkle';
import { nodeEd25519 } from '../../crypto/ed25519';

export type StepName = 'storage' | 'envelopes' | 'schemas' | 'signatures' | 'roles' | 'chains' | 'merkle' | 'checkpoints';

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
  /** Sparse: data of key events, which the main thread folds into the key registry. */
  keyEvents: Array<{ i: number; data: JsonObject }>;
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

/** Packs recorded events into a chunk (one buffer for all bytes, so it can be transferred, not copied). */
export function packChunk(
  events: ReadonlyArray<{ position: number; stream: string; revision: number; id: string; type: string; bytes: Uint8Array; hash: Uint8Array }>,
  keys: Array<[string, Uint8Array]>,
): ChunkInput {
  const n = events.length;
  const offsets = new Uint32Array(n + 1);
  let total = 0;
  for (let i = 0; i < n; i++) {
    offsets[i] = total;
    total += (events[i] as { bytes: Uint8Array }).bytes.byteLength;
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
    const e = events[i] as (typeof events)[number];
    bytes.set(e.bytes, offsets[i] as number);
    if (e.hash.byteLength === 32) hashes.set(e.hash, 32 * i);
    positions[i] = e.position;
    streams[i] = e.stream;
    revisions[i] = e.revision;
    ids[i] = e.id;
    types[i] = e.type;
  }
  return { positions, streams, revisions, ids, types, bytes, offsets, hashes, keys };
}

/**
 * Two passes over the chunk: first everything but the signatures (hashes, parse, columns, schema), then the
 * signatures in one tight loop, which keeps OpenSSL's code and tables hot in the cache the way a bare verify loop does
 * (measurably faster than interleaving the JSON work with each verify).
 */
export function checkChunk(input: ChunkInput, keyCache: Map<string, Uint8Array>): ChunkOutput {
  for (const [signer, key] of input.keys) keyCache.set(signer, key);
  const n = input.positions.length;
  const digests = new Uint8Array(DIGEST_STRIDE * n);
  const signerIndex = new Uint32Array(n);
  const signers: string[] = [];
  const signerIds = new Map<string, number>();
  const out: ChunkOutput = { digests, signerIndex, signers, problems: [], unknownSigner: [], keyEvents: [] };
  const toVerify: Array<{ i: number; key: Uint8Array; signing: Buffer; signature: Buffer; signer: string }> = [];
  for (let i = 0; i < n; i++) {
    const position = input.positions[i] as number;
    const bytes = eventBytes(input, i);
    const hash = sha256(bytes);
    digests.set(hash, DIGEST_STRIDE * i + 32);
    digests.set(leafHash(bytes), DIGEST_STRIDE * i + 64);
    const problem = (step: StepName, code: string, message: string): void => void out.problems.push({ i, step, code, message });
    let parsed;
    try {
      parsed = parseEnvelope(bytes, { position });
    } catch (e) {
      const err = e as { code?: string; message: string };
      problem('envelopes', err.code ?? 'ENVELOPE_MALFORMED', `position ${position}: ${err.message}`);
      continue;
    }
    const env = parsed.envelope;
    digests.set(Buffer.from(env.prev, 'hex'), DIGEST_STRIDE * i);
    let si = signerIds.get(env.signer);
    if (si === undefined) {
      si = signers.push(env.signer) - 1;
      signerIds.set(env.signer, si);
    }
    signerIndex[i] = si;
    if (env.type === 'KeyRegistered' || env.type === 'KeyRevoked') out.keyEvents.push({ i, data: env.data });
    if (env.position !== position || env.stream !== input.streams[i] || env.revision !== input.revisions[i] || env.id !== input.ids[i] || env.type !== input.types[i]) {
      problem(
        'envelopes',
        'VERIFY_COLUMN_MISMATCH',
        `stored at position ${position} as ${input.streams[i]}@${input.revisions[i]}, ${input.types[i]} ${input.ids[i]}, but the signed envelope says position ${env.position}, ${env.stream}@${env.revision}, ${env.type} ${env.id}`,
      );
      continue;
    }
    if (!hash.equals(input.hashes.subarray(32 * i, 32 * i + 32))) {
      problem('envelopes', 'VERIFY_HASH_MISMATCH', `the stored hash of position ${position} is not the SHA-256 of its bytes`);
      continue;
    }
    const dp = eventDataProblem(env.type, env.data, parsed.dataBytes);
    if (dp) {
      problem('schemas', dp.code.replace(/^LEDGER_/, 'VERIFY_'), dp.message);
      continue;
    }
    const key = keyCache.get(env.signer);
    if (!key) {
      out.unknownSigner.push(i);
      continue;
    }
    toVerify.push({ i, key, signing: parsed.signing, signature: parsed.signature, signer: env.signer });
  }
  for (const v of toVerify) {
    if (!nodeEd25519.verify(v.key, v.signing, v.signature))
      out.problems.push({ i: v.i, step: 'signatures', code: 'VERIFY_BAD_SIGNATURE', message: `the signature of position ${input.positions[v.i]} does not verify with ${v.signer}` });
  }
  // Problems in event order, so the first one reported is the first bad event.
  out.problems.sort((a, b) => a.i - b.i);
  return out;
}
