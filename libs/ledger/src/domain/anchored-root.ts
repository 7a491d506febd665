/**
 * RFC 9162 roots that trust stored Merkle nodes no further than a signed checkpoint vouches for them.
 *
 * Stored nodes are derived data: a damaged or edited node store yields roots and proofs of a tree that never
 * existed. A signed checkpoint (size c, root R) pins them: for a size s <= c, the root computed from the stored
 * nodes is authentic when the RFC 9162 consistency proof from s to c, computed from the same nodes, verifies against
 * it and R (the proof's hashes determine both roots, so a changed node changes R; finding other nodes that give R is
 * a SHA-256 collision). For s > c, the perfect subtrees of the tree of size c (c's binary decomposition, O(log c)
 * nodes) are read from the store and must combine to R; the leaves from c to s are hashed from the stored events, not
 * read from the store. The cost is O(log c) nodes plus the events after the checkpoint.
 */
import { consistencyProof, emptyRoot, rootAt, verifyConsistency, type NodeSource } from './merkle';
import { RootAccumulator } from './root-accumulator';

export interface SignedTreeHead {
  treeSize: number;
  rootHash: Uint8Array;
}

const same = (a: Uint8Array, b: Uint8Array): boolean => Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(b);

/**
 * The authentic root of the first `size` leaves, or null when the stored nodes contradict the signed checkpoint
 * (`signed`: the latest one; null when none was signed, then every leaf is hashed from the events). `leavesAfter(c,
 * s)` gives the RFC 9162 leaf hashes of the stored events c..s-1, in order.
 */
export function anchoredRoot(
  signed: SignedTreeHead | null,
  size: number,
  node: NodeSource,
  leavesAfter: (from: number, to: number) => Iterable<Uint8Array>,
): Uint8Array | null {
  const c = signed?.treeSize ?? 0;
  const signedRoot = signed?.rootHash ?? emptyRoot();
  if (size === 0) return emptyRoot();
  if (size <= c) {
    const r = rootAt(size, node);
    if (size === c) return same(r, signedRoot) ? r : null;
    return verifyConsistency(size, c, consistencyProof(size, c, node), r, signedRoot) ? r : null;
  }
  // The signed tree's perfect subtrees, largest first, then the leaves after it.
  const acc = new RootAccumulator();
  let top = 1;
  while (top * 2 <= c) top *= 2;
  let offset = 0;
  for (let k = top, level = Math.log2(top); c > 0 && k >= 1; k /= 2, level--) {
    if (c - offset >= k) {
      acc.pushSubtree(k, node(level, offset / k));
      offset += k;
    }
  }
  if (!same(acc.root(), signedRoot)) return null;
  for (const leaf of leavesAfter(c, size)) acc.push(leaf);
  return acc.size === size ? acc.root() : null;
}
