/**
 * The merkle step's checks of the stored Merkle nodes (SQLite `merkle_nodes`) against the tree recomputed from the
 * events: their shape, the leaves (chunk by chunk, during the ordered pass) and every node above them (after it).
 */
import type { StoredMerkleNodes } from '../../ports/merkle-node-store.port';
import { DIGEST_STRIDE, type VerifyKernels } from './check-chunk';
import { Failed } from './verify-failure';

export const merkleFailure = (message: string, position?: number): Failed =>
  new Failed({ step: 'merkle', code: 'VERIFY_MERKLE_NODES', message: `merkle_nodes: ${message}`, ...(position !== undefined ? { position } : {}) });

/**
 * Checks the shape of the stored Merkle nodes and returns how many leaves they hold (m, the level 0 rows): every
 * level is an integer from 0 to 63; level 0 holds idx 0..m-1; each level L >= 1 holds exactly idx 0..floor(m / 2^L) - 1
 * (the perfect subtrees of the first m leaves); no other level has rows. (Rows are read back later, each checked to
 * be the idx expected there, as an INTEGER, with a 32-byte BLOB hash: nodeRange.)
 */
export function merkleShape(nodes: StoredMerkleNodes): number {
  const at = new Map<number, { count: number; minIdx: unknown; maxIdx: unknown }>();
  for (const l of nodes.shape()) {
    if (typeof l.level !== 'number' || !Number.isSafeInteger(l.level) || l.level < 0 || l.level > 63) throw merkleFailure(`a row has level ${String(l.level)}`);
    at.set(l.level, l);
  }
  const m = at.get(0)?.count ?? 0;
  for (const [level, l] of at) {
    const want = Math.floor(m / 2 ** level);
    if (l.count !== want || (want > 0 && (l.minIdx !== 0 || l.maxIdx !== want - 1)))
      throw merkleFailure(
        `level ${level} holds ${l.count} rows (idx ${String(l.minIdx)}..${String(l.maxIdx)}), but a tree of ${m} indexed leaves has exactly ${want} (idx 0..${want - 1})`,
      );
  }
  for (let level = 0; Math.floor(m / 2 ** level) > 0; level++)
    if (!at.has(level)) throw merkleFailure(`level ${level} has no rows, but a tree of ${m} indexed leaves has ${Math.floor(m / 2 ** level)}`);
  return m;
}

/** The hashes of rows [from, to) of a level, 32 bytes each, after checking that exactly those rows are there. */
function nodeRange(nodes: StoredMerkleNodes, level: number, from: number, to: number): Uint8Array {
  const k = to - from;
  const r = nodes.range(level, from, to);
  if (r.count !== k || r.wellFormed !== k || (k > 0 && (r.minIdx !== from || r.maxIdx !== to - 1)) || r.hashes.byteLength !== 32 * k)
    throw merkleFailure(
      `level ${level}, idx ${from}..${to - 1}: ${r.count} rows where ${k} were expected, ${r.wellFormed} of them with an INTEGER idx and a 32-byte BLOB hash`,
      from * 2 ** level,
    );
  return r.hashes;
}

/**
 * The stored leaf hashes of positions [from, to) equal the recomputed ones (digests of the chunk starting at from),
 * which are kept in `keep` (32 bytes each, at 32 * position).
 */
export function checkStoredLeaves(nodes: StoredMerkleNodes, from: number, to: number, digests: Uint8Array, keep: Uint8Array): void {
  const stored = nodeRange(nodes, 0, from, to);
  const s = Buffer.from(stored.buffer, stored.byteOffset, stored.byteLength);
  for (let j = 0; j < to - from; j++) {
    const leaf = digests.subarray(DIGEST_STRIDE * j + 64, DIGEST_STRIDE * j + 96);
    if (s.compare(leaf, 0, 32, 32 * j, 32 * j + 32) !== 0)
      throw merkleFailure(
        `the leaf row (level 0, idx ${from + j}) is not the leaf hash of the event at position ${from + j}: proofs from it would not verify`,
        from + j,
      );
    keep.set(leaf, 32 * (from + j));
  }
}

/**
 * Every stored node above level 0 is the RFC 9162 hash of its two children: at level 1 the leaf hashes the pass
 * recomputed (`leafHashes`, 32 bytes each), above it the stored level below, which was checked just before (so, by
 * induction, every stored node is the hash of its subtree's leaves). Each stored row is read once. Hashed in batches
 * through the kernels' digestAll: the SHA-256 of 0x01 || left || right is a node hash (its second digest, of a 0x00
 * prefix, is not used).
 */
export function checkStoredInteriorNodes(nodes: StoredMerkleNodes, leaves: number, kernels: VerifyKernels, leafHashes: Uint8Array): void {
  const BATCH = 4096;
  const bytes = new Uint8Array(65 * BATCH);
  const offsets = new Uint32Array(BATCH + 1);
  const out = new Uint8Array(64 * BATCH);
  let below = leafHashes;
  for (let level = 1; Math.floor(leaves / 2 ** level) > 0; level++) {
    const count = Math.floor(leaves / 2 ** level);
    const here = new Uint8Array(32 * count);
    for (let from = 0; from < count; from += BATCH) {
      const to = Math.min(count, from + BATCH);
      const k = to - from;
      const parents = nodeRange(nodes, level, from, to);
      const p = Buffer.from(parents.buffer, parents.byteOffset, parents.byteLength);
      for (let j = 0; j < k; j++) {
        bytes[65 * j] = 0x01;
        bytes.set(below.subarray(64 * (from + j), 64 * (from + j) + 64), 65 * j + 1);
        offsets[j + 1] = 65 * (j + 1);
      }
      kernels.digestAll(bytes.subarray(0, 65 * k), offsets.subarray(0, k + 1), out, 64, 0);
      for (let j = 0; j < k; j++) {
        if (p.compare(out, 64 * j, 64 * j + 32, 32 * j, 32 * j + 32) !== 0)
          throw merkleFailure(
            `(level ${level}, idx ${from + j}) is not the hash of its two children: proofs through it would not verify`,
            (from + j) * 2 ** level,
          );
      }
      here.set(parents, 32 * from);
    }
    below = here;
  }
}
