/**
 * The per-event checks that need no ledger-wide state, so they can run on worker threads: parse and
 * canonical form, stored columns against the envelope, stored hash, data schema, and the Ed25519 signature.
 * What needs order (positions, chains, key roles, the Merkle root) stays on the main thread.
 */
import { createHash } from 'node:crypto';
import { eventDataProblem } from '../../domain/catalogue';
import { parseEnvelope } from '../../domain/envelope';
import { leafHash } from '../../domain/merkle';
import type { JsonObject } from '../../domain/json';
import { nodeEd25519 } from '../../crypto/ed25519';

export type StepName = 'storage' | 'envelopes' | 'schemas' | 'signatures' | 'roles' | 'chains' | 'merkle' | 'checkpoints';

export interface ChunkInput {
  positions: number[];
  streams: string[];
  revisions: number[];
  ids: string[];
  types: string[];
  bytes: Uint8Array[];
  hashes: Uint8Array[];
  /** signer -> 32-byte public key, for every key registered up to the end of this chunk. */
  keys: Array<[string, Uint8Array]>;
}

export interface CheckedEvent {
  position: number;
  type: string;
  stream: string;
  revision: number;
  signer: string;
  prev: string;
  /** Hex SHA-256 of the wire bytes. */
  hash: string;
  /** Only for key events, which the main thread folds into the key registry. */
  data?: JsonObject;
  /** True when the signer's key was not known to the checker (the main thread decides). */
  unknownSigner?: boolean;
  problem?: { step: StepName; code: string; message: string };
}

export interface ChunkOutput {
  events: CheckedEvent[];
  /** RFC 9162 leaf hashes, 32 bytes each, concatenated in order. */
  leafHashes: Uint8Array;
}

export function checkChunk(input: ChunkInput, keyCache: Map<string, Uint8Array>): ChunkOutput {
  for (const [signer, key] of input.keys) keyCache.set(signer, key);
  const n = input.positions.length;
  const leafHashes = Buffer.alloc(32 * n);
  const events: CheckedEvent[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const position = input.positions[i] as number;
    const bytes = input.bytes[i] as Uint8Array;
    leafHash(bytes).copy(leafHashes, 32 * i);
    const hash = createHash('sha256').update(bytes).digest();
    const base = { position, type: input.types[i] as string, stream: input.streams[i] as string, revision: input.revisions[i] as number, signer: '', prev: '', hash: hash.toString('hex') };
    let parsed;
    try {
      parsed = parseEnvelope(bytes, { position });
    } catch (e) {
      const err = e as { code?: string; message: string };
      events[i] = { ...base, problem: { step: 'envelopes', code: err.code ?? 'ENVELOPE_MALFORMED', message: err.message } };
      continue;
    }
    const env = parsed.envelope;
    const ev: CheckedEvent = { position, type: env.type, stream: env.stream, revision: env.revision, signer: env.signer, prev: env.prev, hash: base.hash };
    if (env.type === 'KeyRegistered' || env.type === 'KeyRevoked') ev.data = env.data;
    events[i] = ev;
    const stored = input.hashes[i] as Uint8Array;
    if (env.position !== position || env.stream !== input.streams[i] || env.revision !== input.revisions[i] || env.id !== input.ids[i] || env.type !== input.types[i]) {
      ev.problem = {
        step: 'envelopes',
        code: 'VERIFY_COLUMN_MISMATCH',
        message: `stored at position ${position} as ${input.streams[i]}@${input.revisions[i]}, ${input.types[i]} ${input.ids[i]}, but the signed envelope says position ${env.position}, ${env.stream}@${env.revision}, ${env.type} ${env.id}`,
      };
      continue;
    }
    if (stored.byteLength !== 32 || !hash.equals(Buffer.from(stored.buffer, stored.byteOffset, stored.byteLength))) {
      ev.problem = { step: 'envelopes', code: 'VERIFY_HASH_MISMATCH', message: `the stored hash of position ${position} is not the SHA-256 of its bytes` };
      continue;
    }
    const dp = eventDataProblem(env.type, env.data);
    if (dp) {
      ev.problem = { step: 'schemas', code: dp.code.replace(/^LEDGER_/, 'VERIFY_'), message: dp.message };
      continue;
    }
    const key = keyCache.get(env.signer);
    if (!key) {
      ev.unknownSigner = true;
      continue;
    }
    if (!nodeEd25519.verify(key, parsed.signing, parsed.signature)) {
      ev.problem = { step: 'signatures', code: 'VERIFY_BAD_SIGNATURE', message: `the signature of position ${position} does not verify with ${env.signer}` };
    }
  }
  return { events, leafHashes };
}
