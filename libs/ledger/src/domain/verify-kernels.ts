/**
 * The kernels of ledger verification as pure functions over byte arrays: the two SHA-256 digests of every envelope
 * of a chunk, the Merkle hash of a perfect subtree, and (optional) the scan that cuts envelopes in the common
 * canonical layout. Their types, and the JavaScript kernels (node:crypto, no I/O), live here; the ledger kernels
 * addon (adapters/native-kernels.ts) implements the same types in C, and the verification (application/verify)
 * takes either. Kept in domain/ because they compute and never do I/O: no adapter or application code is needed to
 * name or run them.
 */
import { sha256 } from './envelope';
import { leafHash, nodeHash } from './merkle';

/**
 * Writes, for each event i of `bytes`/`offsets` (event i is bytes[offsets[i], offsets[i + 1])), its envelope hash
 * SHA-256(bytes) at out[stride * i + at] and its Merkle leaf hash SHA-256(0x00 || bytes) 32 bytes further on.
 * `jsDigestAll` does it through node:crypto; the ledger kernels addon (adapters/native-kernels.ts) does the same in
 * one call per chunk.
 */
export type DigestAll = (bytes: Uint8Array, offsets: Uint32Array, out: Uint8Array, stride: number, at: number) => void;

export const jsDigestAll: DigestAll = (bytes, offsets, out, stride, at) => {
  for (let i = 0; i + 1 < offsets.length; i++) {
    const b = bytes.subarray(offsets[i] as number, offsets[i + 1] as number);
    out.set(sha256(b), stride * i + at);
    out.set(leafHash(b), stride * i + at + 32);
  }
};

/** The RFC 9162 hash of the perfect subtree over `count` (a power of two) leaf hashes at leaves[stride * i + at]. */
export type SubtreeRoot = (leaves: Uint8Array, stride: number, at: number, count: number) => Uint8Array;

export const jsSubtreeRoot: SubtreeRoot = (leaves, stride, at, count) => {
  if (count < 1 || (count & (count - 1)) !== 0) throw new RangeError('count must be a power of two');
  let level: Uint8Array[] = Array.from({ length: count }, (_, i) => leaves.subarray(stride * i + at, stride * i + at + 32));
  while (level.length > 1) level = Array.from({ length: level.length / 2 }, (_, j) => nodeHash(level[2 * j] as Uint8Array, level[2 * j + 1] as Uint8Array));
  return Buffer.from(level[0] as Uint8Array);
};

/**
 * Recognises envelopes in the canonical layout and cuts them (libs/ledger/native/ledger-kernels.c, scanEnvelopes):
 * for each recognised event i, meta[SCAN_META * i ...] = 1, end of data, position, revision, signer offset and
 * length, stream offset and length, type offset and length; the decoded signature at sigs[64 * i]; the signing bytes
 * at signing[offsets[i]] (the envelope less its 97-byte sig member); `prev` at digests[stride * i + prevAt]. Others
 * get meta[SCAN_META * i] = 0 and go through parseEnvelope. Returns how many were recognised.
 */
export type ScanEnvelopes = (
  bytes: Uint8Array,
  offsets: Uint32Array,
  meta: Float64Array,
  sigs: Uint8Array,
  signing: Uint8Array,
  digests: Uint8Array,
  stride: number,
  prevAt: number,
) => number;
export const SCAN_META = 10;

/**
 * The kernels of verification: node:crypto and parseEnvelope (`jsKernels`), or the ledger kernels addon, which gives
 * the same digests and accepts no envelope parseEnvelope refuses (it leaves anything unusual to it).
 */
export interface VerifyKernels {
  digestAll: DigestAll;
  subtreeRoot: SubtreeRoot;
  scanEnvelopes?: ScanEnvelopes;
}

export const jsKernels: VerifyKernels = { digestAll: jsDigestAll, subtreeRoot: jsSubtreeRoot };
