/**
 * RFC 9162 section 2.1 Merkle tree hashing, proofs and proof verification (SHA-256).
 *
 *   MTH({})       = SHA-256()                                   emptyRoot()
 *   MTH({d0})     = SHA-256(0x00 || d0)                         leafHash()
 *   MTH(D[n])     = SHA-256(0x01 || MTH(D[0:k]) || MTH(D[k:n])) nodeHash(), k = largest power of two < n
 *
 * Proofs are produced from a node source: node (level, index) is the hash of the perfect subtree over leaves
 * [index * 2^level, (index + 1) * 2^level), level 0 being the leaf hashes (MerkleNodeStore keeps exactly these).
 * The MTH of any subtree that appears in the RFC 9162 recursion, [start, start + size) with `start` a multiple of
 * the smallest power of two >= size, is the right-to-left fold of the perfect subtrees `size` splits into (its
 * binary digits, largest first): O(log n) node lookups. A proof needs at most O(log n) of those: O(log^2 n).
 *
 * Sizes and indexes are JavaScript numbers: integers in [0, 2^53). All arithmetic below is plain arithmetic, never
 * 32-bit bitwise operators, so the whole range is correct.
 *
 * Verification (verifyInclusion, verifyConsistency) is RFC 9162 2.1.3.2 / 2.1.4.2 to the letter and returns a
 * boolean: false for every wrong, malformed or out-of-range input, never an exception. The 196 transparency-dev test
 * cases (tests/fixtures/vectors/merkle) pin that down.
 */
import { createHash, hash } from 'node:crypto';
import { AssayError } from '@assay/core';

export const HASH_SIZE = 32;
/** A proof for a tree of fewer than 2^53 leaves has fewer than 54 hashes (consistency: one more for the prepended root). */
export const MAX_PROOF_HASHES = 64;

/** Hash of the perfect subtree (level, index): leaves [index * 2^level, (index + 1) * 2^level). */
export type NodeSource = (level: number, index: number) => Uint8Array;

export interface MerkleNode {
  level: number;
  index: number;
  hash: Uint8Array;
}

const LEAF_PREFIX = Buffer.from([0x00]);
const NODE_PREFIX = Buffer.from([0x01]);
const EMPTY_ROOT = createHash('sha256').digest();

/**
 * Leaf and node hashes run once per event (and once more per event, on average, for the interior nodes) on the
 * verification hot path. For inputs up to SCRATCH_BYTES the prefix and the input are copied into one scratch buffer
 * and hashed with the one-shot `crypto.hash`, which costs about half of a createHash/update/digest sequence for
 * inputs this small. The result is always a fresh Buffer.
 */
const SCRATCH_BYTES = 16 * 1024;
const scratch = Buffer.alloc(SCRATCH_BYTES + 1);

function prefixed(prefix: number, a: Uint8Array, b?: Uint8Array): Buffer {
  const n = 1 + a.byteLength + (b?.byteLength ?? 0);
  if (n > scratch.byteLength) {
    const h = createHash('sha256')
      .update(prefix === 0 ? LEAF_PREFIX : NODE_PREFIX)
      .update(a);
    return (b ? h.update(b) : h).digest();
  }
  scratch[0] = prefix;
  scratch.set(a, 1);
  if (b) scratch.set(b, 1 + a.byteLength);
  return hash('sha256', scratch.subarray(0, n), 'buffer');
}

export function leafHash(data: Uint8Array): Buffer {
  return prefixed(0x00, data);
}

export function nodeHash(left: Uint8Array, right: Uint8Array): Buffer {
  return prefixed(0x01, left, right);
}

/** MTH of the empty tree: SHA-256 of the empty string. A fresh copy on every call. */
export function emptyRoot(): Buffer {
  return Buffer.from(EMPTY_ROOT);
}

function merkleError(code: string, message: string, details: Record<string, unknown>): AssayError {
  return new AssayError(code, 'invalid_input', message, { details });
}

function isCount(n: unknown): n is number {
  return typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;
}

function requireCount(n: unknown, field: string): number {
  if (!isCount(n)) throw merkleError('MERKLE_BAD_SIZE', `${field} must be an integer in [0, 2^53), got ${String(n)}`, { field });
  return n;
}

function isHash(h: unknown): h is Uint8Array {
  return h instanceof Uint8Array && h.byteLength === HASH_SIZE;
}

function isPowerOfTwo(n: number): boolean {
  if (n < 1) return false;
  while (n % 2 === 0) n /= 2;
  return n === 1;
}

/** Largest power of two strictly below n (n >= 2). */
function splitPoint(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

function half(n: number): number {
  return (n - (n % 2)) / 2;
}

function lookup(node: NodeSource, level: number, index: number): Uint8Array {
  const h = node(level, index);
  if (!isHash(h))
    throw new AssayError('MERKLE_BAD_NODE', 'internal', `node source returned a bad hash for node (${level}, ${index})`, {
      details: { level, index },
    });
  return h;
}

/**
 * MTH of leaves [start, start + size), size >= 1, where start is a multiple of the smallest power of two >= size
 * (true of every subtree in the RFC 9162 recursion): fold the perfect subtrees of `size` right to left.
 */
function subtreeHash(start: number, size: number, node: NodeSource): Uint8Array {
  let top = 0;
  while (2 ** (top + 1) <= size) top++;
  const parts: Uint8Array[] = [];
  let pos = start;
  let remaining = size;
  for (let level = top; level >= 0 && remaining > 0; level--) {
    const width = 2 ** level;
    if (remaining >= width) {
      parts.push(lookup(node, level, pos / width));
      pos += width;
      remaining -= width;
    }
  }
  let acc = parts[parts.length - 1] as Uint8Array;
  for (let i = parts.length - 2; i >= 0; i--) acc = nodeHash(parts[i] as Uint8Array, acc);
  return acc;
}

/** RFC 9162 MTH of the first `size` leaves. */
export function rootAt(size: number, node: NodeSource): Uint8Array {
  requireCount(size, 'tree size');
  if (size === 0) return emptyRoot();
  return subtreeHash(0, size, node);
}

/** RFC 9162 2.1.3.1 PATH(leafIndex, D[treeSize]), ordered from the leaf's sibling up to the root's child. */
export function inclusionProof(leafIndex: number, treeSize: number, node: NodeSource): Uint8Array[] {
  requireCount(treeSize, 'tree size');
  requireCount(leafIndex, 'leaf index');
  if (leafIndex >= treeSize)
    throw merkleError('MERKLE_LEAF_INDEX_OUT_OF_RANGE', `leaf index ${leafIndex} is not below the tree size ${treeSize}`, { leafIndex, treeSize });
  const topDown: Uint8Array[] = [];
  let start = 0;
  let size = treeSize;
  let m = leafIndex;
  while (size > 1) {
    const k = splitPoint(size);
    if (m < k) {
      topDown.push(subtreeHash(start + k, size - k, node));
      size = k;
    } else {
      topDown.push(subtreeHash(start, k, node));
      start += k;
      m -= k;
      size -= k;
    }
  }
  return topDown.reverse();
}

/**
 * RFC 9162 2.1.4.1 PROOF(size1, D[size2]) for 0 < size1 <= size2 (empty when the sizes are equal).
 * A proof from the empty tree is meaningless (RFC 9162 2.1.4.2 requires 0 < first) and refused.
 */
export function consistencyProof(size1: number, size2: number, node: NodeSource): Uint8Array[] {
  requireCount(size1, 'first tree size');
  requireCount(size2, 'second tree size');
  if (size1 === 0 || size1 > size2)
    throw merkleError('MERKLE_BAD_CONSISTENCY_RANGE', `a consistency proof needs 0 < first size <= second size, got ${size1} and ${size2}`, { size1, size2 });
  const topDown: Uint8Array[] = [];
  let head: Uint8Array | null = null;
  let start = 0;
  let size = size2;
  let m = size1;
  let whole = true; // the RFC's `b`: still on the path of the complete old tree
  for (;;) {
    if (m === size) {
      if (!whole) head = subtreeHash(start, m, node);
      break;
    }
    const k = splitPoint(size);
    if (m <= k) {
      topDown.push(subtreeHash(start + k, size - k, node));
      size = k;
    } else {
      topDown.push(subtreeHash(start, k, node));
      start += k;
      m -= k;
      size -= k;
      whole = false;
    }
  }
  const proof = topDown.reverse();
  if (head) proof.unshift(head);
  return proof;
}

function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false;
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false;
  return true;
}

function isProof(proof: unknown): proof is Uint8Array[] {
  return Array.isArray(proof) && proof.length <= MAX_PROOF_HASHES && proof.every(isHash);
}

/** RFC 9162 2.1.3.2. True exactly when `proof` proves `leaf` (a leaf hash) at `leafIndex` in the tree `root`. */
export function verifyInclusion(
  leafIndex: number,
  treeSize: number,
  leaf: Uint8Array,
  proof: readonly Uint8Array[],
  root: Uint8Array,
  memo?: NodeHashMemo,
): boolean {
  if (!isCount(leafIndex) || !isCount(treeSize) || !isHash(leaf) || !isHash(root) || !isProof(proof)) return false;
  // the node being combined is at (level, fn): the memo's key, since one tree has one pair of children there
  let level = 0;
  const node = memo ? (l: Uint8Array, r: Uint8Array) => memo.nodeHash(level, fn, l, r) : nodeHash;
  // 1. leaf_index must be below tree_size.
  if (leafIndex >= treeSize) return false;
  // 2, 3.
  let fn = leafIndex;
  let sn = treeSize - 1;
  let r: Uint8Array = leaf;
  // 4.
  for (const p of proof) {
    if (sn === 0) return false;
    if (fn % 2 === 1 || fn === sn) {
      r = node(p, r);
      if (fn % 2 === 0) {
        while (fn % 2 === 0 && fn !== 0) {
          fn = half(fn);
          sn = half(sn);
          level++;
        }
      }
    } else {
      r = node(r, p);
    }
    fn = half(fn);
    sn = half(sn);
    level++;
  }
  // 5.
  return sn === 0 && bytesEqual(r, root);
}

/**
 * nodeHash remembered by tree position, for checking many inclusion proofs against one tree (one size, one root):
 * the proofs of nearby leaves share most of their interior nodes, so each is hashed once. A hit needs both children
 * byte for byte equal to the remembered ones, so the answers are exactly nodeHash's whatever the proofs hold. Bounded:
 * past `limit` entries it starts again empty.
 */
export class NodeHashMemo {
  private readonly known = new Map<number, { left: Buffer; right: Buffer; hash: Buffer }>();
  constructor(private readonly limit = 1 << 20) {}

  /** The hash of the pair combined at `index` of `level` (0: the leaves). */
  nodeHash(level: number, index: number, left: Uint8Array, right: Uint8Array): Buffer {
    // a key shared by two positions (beyond 2^53) only costs a miss: a hit still needs equal children
    const key = level * 2 ** 46 + index;
    const hit = this.known.get(key);
    if (hit && bytesEqual(hit.left, left) && bytesEqual(hit.right, right)) return hit.hash;
    const hash = nodeHash(left, right);
    if (this.known.size >= this.limit) this.known.clear();
    this.known.set(key, { left: Buffer.from(left), right: Buffer.from(right), hash });
    return hash;
  }
}

/**
 * RFC 9162 2.1.4.2, for 0 < size1 <= size2. Equal sizes: the proof must be empty and the roots identical (byte for
 * byte; with nothing to prove, their length is not examined). size1 = 0 is refused: a proof from the empty tree says
 * nothing, and RFC 9162 defines verification only for 0 < first.
 */
export function verifyConsistency(size1: number, size2: number, proof: readonly Uint8Array[], root1: Uint8Array, root2: Uint8Array): boolean {
  if (!isCount(size1) || !isCount(size2) || !Array.isArray(proof)) return false;
  if (!(root1 instanceof Uint8Array) || !(root2 instanceof Uint8Array)) return false;
  if (size1 === 0 || size1 > size2) return false;
  if (size1 === size2) return proof.length === 0 && bytesEqual(root1, root2);
  if (!isHash(root1) || !isHash(root2) || !isProof(proof)) return false;
  // 1. An empty path proves nothing.
  if (proof.length === 0) return false;
  // 2. When first is a power of two the old root is itself a node of the new tree, so the proof omits it.
  const path: Uint8Array[] = isPowerOfTwo(size1) ? [root1, ...proof] : [...proof];
  // 3, 4.
  let fn = size1 - 1;
  let sn = size2 - 1;
  while (fn % 2 === 1) {
    fn = half(fn);
    sn = half(sn);
  }
  // 5.
  let fr = path[0] as Uint8Array;
  let sr = fr;
  // 6.
  for (let i = 1; i < path.length; i++) {
    const c = path[i] as Uint8Array;
    if (sn === 0) return false;
    if (fn % 2 === 1 || fn === sn) {
      fr = nodeHash(c, fr);
      sr = nodeHash(c, sr);
      if (fn % 2 === 0) {
        while (fn % 2 === 0 && fn !== 0) {
          fn = half(fn);
          sn = half(sn);
        }
      }
    } else {
      sr = nodeHash(sr, c);
    }
    fn = half(fn);
    sn = half(sn);
  }
  // 7.
  return sn === 0 && bytesEqual(fr, root1) && bytesEqual(sr, root2);
}

/**
 * Every node that becomes complete when `newLeafHashes` are appended to a tree of `existingLeafCount` leaves, the
 * new leaves themselves (level 0) included, in completion order (so within each level by ascending index).
 * `node` is asked only for the existing right edge (one node per set bit of existingLeafCount); everything else is
 * carried in a local frontier, so a batch of n leaves costs n leaf copies and about n node hashes.
 */
export function newNodesForAppend(existingLeafCount: number, newLeafHashes: readonly Uint8Array[], node: NodeSource): MerkleNode[] {
  requireCount(existingLeafCount, 'existing leaf count');
  if (!Array.isArray(newLeafHashes)) throw merkleError('MERKLE_BAD_HASH', 'new leaf hashes must be an array of 32-byte hashes', {});
  newLeafHashes.forEach((h, i) => {
    if (!isHash(h)) throw merkleError('MERKLE_BAD_HASH', `new leaf hash [${i}] must be ${HASH_SIZE} bytes`, { position: i });
  });
  if (!Number.isSafeInteger(existingLeafCount + newLeafHashes.length)) throw merkleError('MERKLE_BAD_SIZE', 'the tree would exceed 2^53 - 1 leaves', {});

  // frontier[level]: the complete left child at that level still waiting for its right sibling.
  const frontier: Array<Uint8Array | undefined> = [];
  for (let rest = existingLeafCount, level = 0; rest > 0; rest = half(rest), level++) if (rest % 2 === 1) frontier[level] = lookup(node, level, rest - 1);

  const out: MerkleNode[] = [];
  for (let i = 0; i < newLeafHashes.length; i++) {
    let index = existingLeafCount + i;
    let level = 0;
    let h: Uint8Array = Buffer.from(newLeafHashes[i] as Uint8Array);
    out.push({ level, index, hash: h });
    while (index % 2 === 1) {
      const left = frontier[level];
      if (!left)
        throw new AssayError('MERKLE_BAD_NODE', 'internal', `missing left sibling at level ${level} index ${index - 1}`, {
          details: { level, index: index - 1 },
        });
      frontier[level] = undefined;
      h = nodeHash(left, h);
      index = (index - 1) / 2;
      level++;
      out.push({ level, index, hash: h });
    }
    frontier[level] = h;
  }
  return out;
}
