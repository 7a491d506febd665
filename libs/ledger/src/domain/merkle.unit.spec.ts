import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import * as path from 'node:path';
import { vectorsDir } from '../../../../tests/support/vectors';
import { MemoryMerkleNodeStore } from '../adapters/memory/memory-merkle-node-store.adapter';
import {
  consistencyProof,
  emptyRoot,
  inclusionProof,
  NodeHashMemo,
  leafHash,
  newNodesForAppend,
  nodeHash,
  rootAt,
  verifyConsistency,
  verifyInclusion,
  type NodeSource,
} from './merkle';

const b64 = (s: string): Buffer => Buffer.from(s, 'base64');
const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');

// ---- naive RFC 9162 reference, straight from the recursive definitions ------------------------------------------

function split(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

// Ranges are (start, end) over one fixed leaf array, memoized, so the reference stays cheap for ~5000 proofs.
class Naive {
  private memo = new Map<string, Buffer>();
  constructor(private readonly leaves: Uint8Array[]) {}

  mth(start: number, end: number): Buffer {
    const n = end - start;
    if (n === 0) return createHash('sha256').digest();
    if (n === 1) return Buffer.from(this.leaves[start] as Uint8Array);
    const key = `${start}:${end}`;
    let v = this.memo.get(key);
    if (!v) {
      const k = split(n);
      v = nodeHash(this.mth(start, start + k), this.mth(start + k, end));
      this.memo.set(key, v);
    }
    return v;
  }

  /** PATH(m, D[start:end]) */
  path(m: number, start: number, end: number): Buffer[] {
    const n = end - start;
    if (n <= 1) return [];
    const k = split(n);
    return m < k ? [...this.path(m, start, start + k), this.mth(start + k, end)] : [...this.path(m - k, start + k, end), this.mth(start, start + k)];
  }

  /** SUBPROOF(m, D[start:end], b) */
  subproof(m: number, start: number, end: number, b: boolean): Buffer[] {
    const n = end - start;
    if (m === n) return b ? [] : [this.mth(start, end)];
    const k = split(n);
    return m <= k
      ? [...this.subproof(m, start, start + k, b), this.mth(start + k, end)]
      : [...this.subproof(m - k, start + k, end, false), this.mth(start, start + k)];
  }
}

function naiveMth(leaves: Uint8Array[]): Buffer {
  return new Naive(leaves).mth(0, leaves.length);
}

function leavesOf(n: number): Buffer[] {
  return Array.from({ length: n }, (_, i) => leafHash(Buffer.from(`leaf ${i}`)));
}

function flipBit(b: Uint8Array, bit: number): Buffer {
  const c = Buffer.from(b);
  c[bit >> 3] = (c[bit >> 3] as number) ^ (1 << (bit & 7));
  return c;
}

// ---- the 196 transparency-dev vectors ----------------------------------------------------------------------------

interface InclusionCase {
  leafIdx: number;
  treeSize: number;
  root: string;
  leafHash: string;
  proof: string[] | null;
  desc: string;
  wantErr: boolean;
}
interface ConsistencyCase {
  size1: number;
  size2: number;
  root1: string;
  root2: string;
  proof: string[] | null;
  desc: string;
  wantErr: boolean;
}

function jsonFilesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) out.push(...jsonFilesUnder(p));
    else if (name.endsWith('.json')) out.push(p);
  }
  return out;
}

describe('RFC 9162 test vectors (transparency-dev/merkle testdata)', () => {
  // Looked up inside each test: a missing vectors directory fails these tests (never skips them) and leaves the
  // property tests below running.
  const load = (): { root: string; inclusionFiles: string[]; consistencyFiles: string[] } => {
    const root = path.join(vectorsDir(), 'merkle');
    return {
      root,
      inclusionFiles: jsonFilesUnder(path.join(root, 'inclusion')),
      consistencyFiles: jsonFilesUnder(path.join(root, 'consistency')),
    };
  };

  it('finds all 196 cases', () => {
    const { inclusionFiles, consistencyFiles } = load();
    expect(inclusionFiles.length + consistencyFiles.length).toBe(196);
  });

  it('accepts exactly the inclusion cases with wantErr false', () => {
    const { root, inclusionFiles } = load();
    let seen = 0;
    let accepted = 0;
    for (const f of inclusionFiles) {
      const c = JSON.parse(readFileSync(f, 'utf8')) as InclusionCase;
      const ok = verifyInclusion(c.leafIdx, c.treeSize, b64(c.leafHash), (c.proof ?? []).map(b64), b64(c.root));
      if (ok !== !c.wantErr) throw new Error(`${path.relative(root, f)} (${c.desc}): verifier said ${ok}`);
      seen++;
      if (ok) accepted++;
    }
    expect(seen).toBe(inclusionFiles.length);
    expect(accepted).toBeGreaterThan(0);
  });

  it('accepts exactly the consistency cases with wantErr false', () => {
    const { root, consistencyFiles } = load();
    let seen = 0;
    let accepted = 0;
    for (const f of consistencyFiles) {
      const c = JSON.parse(readFileSync(f, 'utf8')) as ConsistencyCase;
      const ok = verifyConsistency(c.size1, c.size2, (c.proof ?? []).map(b64), b64(c.root1), b64(c.root2));
      if (ok !== !c.wantErr) throw new Error(`${path.relative(root, f)} (${c.desc}): verifier said ${ok}`);
      seen++;
      if (ok) accepted++;
    }
    expect(seen).toBe(consistencyFiles.length);
    expect(accepted).toBeGreaterThan(0);
  });
});

// ---- hashing basics ----------------------------------------------------------------------------------------------

describe('RFC 9162 hashing', () => {
  it('hashes leaves and nodes with domain-separating prefixes', () => {
    expect(hex(emptyRoot())).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(hex(leafHash(Buffer.alloc(0)))).toBe('6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d');
    const a = leafHash(Buffer.from('a'));
    const b = leafHash(Buffer.from('b'));
    expect(hex(nodeHash(a, b))).toBe(
      hex(
        createHash('sha256')
          .update(Buffer.from([1]))
          .update(a)
          .update(b)
          .digest(),
      ),
    );
    expect(hex(nodeHash(a, b))).not.toBe(hex(nodeHash(b, a)));
  });

  it('emptyRoot returns a fresh copy', () => {
    const r = emptyRoot();
    r[0] = 0;
    expect(emptyRoot()[0]).toBe(0xe3);
  });
});

// ---- property tests over every small tree ------------------------------------------------------------------------

describe('proofs from a node store, every tree size 1..70', () => {
  const N = 70;
  const leaves = leavesOf(N);
  const store = new MemoryMerkleNodeStore();
  store.appendLeaves(leaves);
  const node: NodeSource = (l, i) => store.node(l, i);
  const roots = [emptyRoot(), ...Array.from({ length: N }, (_, i) => naiveMth(leaves.slice(0, i + 1)))];

  it('computes the root of every prefix like the naive recursive MTH', () => {
    for (let n = 0; n <= N; n++) expect(hex(rootAt(n, node))).toBe(hex(roots[n] as Buffer));
  });

  const naive = new Naive(leaves);

  it('a NodeHashMemo changes no answer: with one memo per tree, warmed by every valid proof, each mutation still fails', () => {
    let compared = 0;
    for (let n = 1; n <= N; n++) {
      const r = roots[n] as Buffer;
      const memo = new NodeHashMemo();
      const proofs = Array.from({ length: n }, (_, m) => inclusionProof(m, n, node));
      for (let m = 0; m < n; m++) expect(verifyInclusion(m, n, leaves[m] as Buffer, proofs[m] as Uint8Array[], r, memo)).toBe(true);
      for (let m = 0; m < n; m++) {
        const proof = proofs[m] as Uint8Array[];
        const cases: Array<[number, Uint8Array, Uint8Array[]]> = [
          [m, flipBit(leaves[m] as Buffer, 3), proof],
          [(m + 1) % n, leaves[m] as Buffer, proof],
          ...proof.map((h, i): [number, Uint8Array, Uint8Array[]] => [m, leaves[m] as Buffer, proof.map((x, j) => (j === i ? flipBit(h, 9) : x))]),
        ];
        for (const [i, leaf, pr] of cases) {
          expect(verifyInclusion(i, n, leaf, pr, r, memo)).toBe(verifyInclusion(i, n, leaf, pr, r));
          compared++;
        }
      }
    }
    expect(compared).toBeGreaterThan(N * 4);
  });

  it('inclusion proofs match RFC 9162 PATH, verify, and every mutation fails', () => {
    const problems: string[] = [];
    let checked = 0;
    for (let n = 1; n <= N; n++) {
      const r = roots[n] as Buffer;
      for (let m = 0; m < n; m++) {
        const leaf = leaves[m] as Buffer;
        const proof = inclusionProof(m, n, node);
        const at = `leaf ${m} of ${n}`;
        if (proof.map(hex).join() !== naive.path(m, 0, n).map(hex).join()) problems.push(`${at}: proof differs from PATH`);
        if (!verifyInclusion(m, n, leaf, proof, r)) problems.push(`${at}: valid proof rejected`);
        const mustFail = (what: string, ok: boolean): void => {
          if (ok) problems.push(`${at}: accepted ${what}`);
        };
        // Wrong index, size, leaf, root. (Size n + 1 is no mutation when leaf m's path has the same shape in both
        // trees: the proof does not bind the size, the root does.)
        if (m + 1 < n) mustFail('index + 1', verifyInclusion(m + 1, n, leaf, proof, r));
        if (m > 0) mustFail('index - 1', verifyInclusion(m - 1, n, leaf, proof, r));
        mustFail('size * 2', verifyInclusion(m, 2 * n, leaf, proof, r));
        mustFail('flipped leaf', verifyInclusion(m, n, flipBit(leaf, 5), proof, r));
        mustFail('flipped root', verifyInclusion(m, n, leaf, proof, flipBit(r, 255)));
        for (let i = 0; i < proof.length; i++) {
          const bad = proof.slice();
          bad[i] = flipBit(proof[i] as Uint8Array, (i * 37 + m) % 256);
          mustFail(`flipped proof[${i}]`, verifyInclusion(m, n, leaf, bad, r));
          mustFail(`proof without [${i}]`, verifyInclusion(m, n, leaf, [...proof.slice(0, i), ...proof.slice(i + 1)], r));
        }
        mustFail('trailing hash', verifyInclusion(m, n, leaf, [...proof, r], r));
        mustFail('leading hash', verifyInclusion(m, n, leaf, [leaf, ...proof], r));
        checked++;
      }
    }
    expect(problems).toEqual([]);
    expect(checked).toBe((N * (N + 1)) / 2);
  });

  it('consistency proofs match RFC 9162 PROOF, verify, and every mutation fails', () => {
    const problems: string[] = [];
    let checked = 0;
    for (let n = 1; n <= N; n++) {
      const r2 = roots[n] as Buffer;
      for (let m = 1; m <= n; m++) {
        const r1 = roots[m] as Buffer;
        const proof = consistencyProof(m, n, node);
        const at = `${m} -> ${n}`;
        if (proof.map(hex).join() !== naive.subproof(m, 0, n, true).map(hex).join()) problems.push(`${at}: proof differs from PROOF`);
        if (!verifyConsistency(m, n, proof, r1, r2)) problems.push(`${at}: valid proof rejected`);
        const mustFail = (what: string, ok: boolean): void => {
          if (ok) problems.push(`${at}: accepted ${what}`);
        };
        mustFail('flipped root1', verifyConsistency(m, n, proof, flipBit(r1, 3), r2));
        mustFail('flipped root2', verifyConsistency(m, n, proof, r1, flipBit(r2, 200)));
        if (m < n) {
          mustFail('swapped roots', verifyConsistency(m, n, proof, r2, r1));
          mustFail('size1 + 1', verifyConsistency(m + 1, n, proof, r1, r2));
          if (m > 1) mustFail('size1 - 1', verifyConsistency(m - 1, n, proof, r1, r2));
          mustFail('size2 * 2', verifyConsistency(m, 2 * n, proof, r1, r2));
          mustFail('empty proof', verifyConsistency(m, n, [], r1, r2));
          for (let i = 0; i < proof.length; i++) {
            const bad = proof.slice();
            bad[i] = flipBit(proof[i] as Uint8Array, (i * 53 + n) % 256);
            mustFail(`flipped proof[${i}]`, verifyConsistency(m, n, bad, r1, r2));
            mustFail(`proof without [${i}]`, verifyConsistency(m, n, [...proof.slice(0, i), ...proof.slice(i + 1)], r1, r2));
          }
          mustFail('trailing hash', verifyConsistency(m, n, [...proof, r2], r1, r2));
          mustFail('leading hash', verifyConsistency(m, n, [r1, ...proof], r1, r2));
        } else {
          if (proof.length !== 0) problems.push(`${at}: equal sizes need an empty proof`);
          mustFail('non-empty proof for equal sizes', verifyConsistency(m, n, [r1], r1, r2));
        }
        checked++;
      }
    }
    expect(problems).toEqual([]);
    expect(checked).toBe((N * (N + 1)) / 2);
  });

  it('refuses impossible proof requests with coded errors', () => {
    expect(() => inclusionProof(5, 5, node)).toThrow(expect.objectContaining({ code: 'MERKLE_LEAF_INDEX_OUT_OF_RANGE' }));
    expect(() => inclusionProof(0, 0, node)).toThrow(expect.objectContaining({ code: 'MERKLE_LEAF_INDEX_OUT_OF_RANGE' }));
    expect(() => inclusionProof(-1, 5, node)).toThrow(expect.objectContaining({ code: 'MERKLE_BAD_SIZE' }));
    expect(() => inclusionProof(0, 1.5, node)).toThrow(expect.objectContaining({ code: 'MERKLE_BAD_SIZE' }));
    expect(() => consistencyProof(0, 5, node)).toThrow(expect.objectContaining({ code: 'MERKLE_BAD_CONSISTENCY_RANGE' }));
    expect(() => consistencyProof(6, 5, node)).toThrow(expect.objectContaining({ code: 'MERKLE_BAD_CONSISTENCY_RANGE' }));
    expect(() => rootAt(N + 1, node)).toThrow(expect.objectContaining({ code: 'MERKLE_NODE_MISSING', kind: 'not_found' }));
    expect(() => rootAt(2 ** 53, node)).toThrow(expect.objectContaining({ code: 'MERKLE_BAD_SIZE' }));
  });

  it('verifiers reject malformed inputs instead of throwing', () => {
    const r = roots[5] as Buffer;
    const proof = inclusionProof(2, 5, node);
    const leaf = leaves[2] as Buffer;
    expect(verifyInclusion(2, 5, leaf, proof, r)).toBe(true);
    expect(verifyInclusion(2, 5, leaf.subarray(0, 31), proof, r)).toBe(false);
    expect(verifyInclusion(2, 5, leaf, proof, Buffer.concat([r, Buffer.alloc(1)]))).toBe(false);
    expect(verifyInclusion(2, 5, leaf, [...proof.slice(0, 2), Buffer.alloc(33)], r)).toBe(false);
    expect(verifyInclusion(2.5, 5, leaf, proof, r)).toBe(false);
    expect(verifyInclusion(2, Number.POSITIVE_INFINITY, leaf, proof, r)).toBe(false);
    expect(verifyInclusion(2, 5, leaf, null as unknown as Uint8Array[], r)).toBe(false);
    expect(
      verifyInclusion(
        0,
        1,
        leaf,
        Array.from({ length: 65 }, () => leaf),
        r,
      ),
    ).toBe(false);
    expect(verifyConsistency(3, 5, consistencyProof(3, 5, node), roots[3] as Buffer, r)).toBe(true);
    expect(verifyConsistency(3, 5, consistencyProof(3, 5, node), (roots[3] as Buffer).subarray(1), r)).toBe(false);
    expect(verifyConsistency(-1, 5, [], r, r)).toBe(false);
    expect(verifyConsistency(0, 0, [], r, r)).toBe(false);
  });
});

// ---- appends and lookup counts -----------------------------------------------------------------------------------

describe('newNodesForAppend and the memory node store', () => {
  it('any batching of appends builds the same store as one big append', () => {
    const leaves = leavesOf(300);
    const whole = new MemoryMerkleNodeStore();
    whole.appendLeaves(leaves);
    const batched = new MemoryMerkleNodeStore();
    let at = 0;
    for (const size of [0, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 68]) {
      batched.appendLeaves(leaves.slice(at, at + size));
      at += size;
      expect(batched.leafCount()).toBe(at);
      expect(hex(rootAt(at, (l, i) => batched.node(l, i)))).toBe(hex(naiveMth(leaves.slice(0, at))));
    }
    expect(at).toBe(300);
    for (let level = 0; 2 ** level <= 300; level++)
      for (let i = 0; (i + 1) * 2 ** level <= 300; i++) expect(hex(batched.node(level, i))).toBe(hex(whole.node(level, i)));
    expect(() => batched.node(1, 150)).toThrow(expect.objectContaining({ code: 'MERKLE_NODE_MISSING' }));
    expect(() => batched.node(9, 0)).toThrow(expect.objectContaining({ code: 'MERKLE_NODE_MISSING' }));
  });

  it('emits exactly the nodes that become complete, and reads only the existing right edge', () => {
    const leaves = leavesOf(12);
    const store = new MemoryMerkleNodeStore();
    store.appendLeaves(leaves.slice(0, 5));
    const calls: string[] = [];
    const nodes = newNodesForAppend(5, leaves.slice(5, 12), (l, i) => {
      calls.push(`${l}/${i}`);
      return store.node(l, i);
    });
    // 5 = 101b: the right edge is leaf 4 (level 0) and the subtree over leaves 0..3 (level 2).
    expect(calls.sort()).toEqual(['0/4', '2/0']);
    expect(nodes.map((n) => `${n.level}/${n.index}`)).toEqual([
      '0/5',
      '1/2',
      '0/6',
      '0/7',
      '1/3',
      '2/1',
      '3/0',
      '0/8',
      '0/9',
      '1/4',
      '0/10',
      '0/11',
      '1/5',
      '2/2',
    ]);
    const byKey = new Map(nodes.map((n) => [`${n.level}/${n.index}`, hex(n.hash)]));
    expect(byKey.get('3/0')).toBe(hex(naiveMth(leaves.slice(0, 8))));
    expect(byKey.get('2/2')).toBe(hex(naiveMth(leaves.slice(8, 12))));
  });

  it('handles a batch of thousands of leaves in one pass', () => {
    const store = new MemoryMerkleNodeStore();
    store.appendLeaves(leavesOf(3));
    const more = Array.from({ length: 20000 }, (_, i) => leafHash(Buffer.from(`bulk ${i}`)));
    let calls = 0;
    const nodes = newNodesForAppend(3, more, (l, i) => {
      calls++;
      return store.node(l, i);
    });
    expect(calls).toBe(2); // 3 = 11b
    // 20000 leaves, and every parent complete in the 20003-leaf tree but not in the 3-leaf one (just node (1, 0) was).
    // A tree of n leaves has n - popcount(n) complete parents: 20003 - 7 = 19996, less the one that existed.
    expect(nodes.filter((n) => n.level === 0)).toHaveLength(20000);
    expect(nodes.length).toBe(20000 + 19996 - 1);
    store.appendLeaves(more);
    expect(store.leafCount()).toBe(20003);
    const all = [...leavesOf(3), ...more];
    expect(hex(rootAt(20003, (l, i) => store.node(l, i)))).toBe(hex(naiveMth(all)));
  });

  it('refuses bad leaf hashes atomically', () => {
    const store = new MemoryMerkleNodeStore();
    store.appendLeaves(leavesOf(3));
    expect(() => store.appendLeaves([leafHash(Buffer.from('x')), Buffer.alloc(31)])).toThrow(
      expect.objectContaining({ code: 'MERKLE_BAD_HASH', message: expect.stringContaining('[1]') }),
    );
    expect(store.leafCount()).toBe(3);
    expect(() => store.node(0, 3)).toThrow(expect.objectContaining({ code: 'MERKLE_NODE_MISSING' }));
    store.reset();
    expect(store.leafCount()).toBe(0);
    expect(() => store.node(0, 0)).toThrow(expect.objectContaining({ code: 'MERKLE_NODE_MISSING' }));
  });

  it('copies what it hands out and what it is given', () => {
    const store = new MemoryMerkleNodeStore();
    const leaf = leafHash(Buffer.from('a'));
    store.appendLeaves([leaf]);
    leaf[0] = (leaf[0] as number) ^ 1;
    const got = store.node(0, 0);
    expect(hex(got)).toBe(hex(leafHash(Buffer.from('a'))));
    got[0] = (got[0] as number) ^ 1;
    expect(hex(store.node(0, 0))).toBe(hex(leafHash(Buffer.from('a'))));
  });

  it('needs O(log^2 n) node lookups for proofs in a huge tree', () => {
    // A synthetic source (any 32-byte value per node) is enough to count lookups.
    let calls = 0;
    const fake: NodeSource = (l, i) => {
      calls++;
      return createHash('sha256').update(`${l}/${i}`).digest();
    };
    const n = 2 ** 40 + 123457;
    rootAt(n, fake);
    expect(calls).toBeLessThanOrEqual(41);
    for (const m of [0, 1, 2 ** 39, n - 1, n - 2, 2 ** 40 - 1, 2 ** 40]) {
      calls = 0;
      const p = inclusionProof(m, n, fake);
      expect(p.length).toBeLessThanOrEqual(41);
      expect(calls).toBeLessThanOrEqual(41 * 41);
    }
    for (const m of [1, 3, 2 ** 39, 2 ** 40, 2 ** 40 + 1, n - 1]) {
      calls = 0;
      consistencyProof(m, n, fake);
      expect(calls).toBeLessThanOrEqual(41 * 41);
    }
    calls = 0;
    newNodesForAppend(n, [leafHash(Buffer.from('z'))], fake);
    expect(calls).toBe(
      n
        .toString(2)
        .split('')
        .filter((c) => c === '1').length,
    );
  });

  it('is correct beyond 32-bit sizes (no bitwise arithmetic)', () => {
    // A consistent virtual tree of 2^33 + 5 leaves: every leaf is h except leaf x, which is g. A perfect subtree
    // without x hashes to H[level]; the one with x is computed along x's path (memoized).
    const h = leafHash(Buffer.from('h'));
    const g = leafHash(Buffer.from('g'));
    const H: Buffer[] = [h];
    for (let l = 1; l < 40; l++) H.push(nodeHash(H[l - 1] as Buffer, H[l - 1] as Buffer));
    const sourceWith = (x: number): NodeSource => {
      const memo = new Map<string, Uint8Array>();
      const node = (l: number, i: number): Uint8Array => {
        const w = 2 ** l;
        if (x < i * w || x >= (i + 1) * w) return H[l] as Buffer;
        if (l === 0) return g;
        const key = `${l}/${i}`;
        let v = memo.get(key);
        if (!v) memo.set(key, (v = nodeHash(node(l - 1, 2 * i), node(l - 1, 2 * i + 1))));
        return v;
      };
      return node;
    };
    const n = 2 ** 33 + 5;
    for (const x of [n - 1, n - 5, 2 ** 33 - 1, 2 ** 32, 2 ** 32 + 1, 12345]) {
      const src = sourceWith(x);
      const root = rootAt(n, src);
      const proof = inclusionProof(x, n, src);
      expect(verifyInclusion(x, n, g, proof, root)).toBe(true);
      expect(verifyInclusion(x + 1, n, g, proof, root)).toBe(false);
      expect(verifyInclusion(x - 1, n, g, proof, root)).toBe(false);
      expect(verifyInclusion(x, n, h, proof, root)).toBe(false);
      for (const m of [x + 1, 2 ** 32 + 3, 2 ** 33, 2 ** 33 + 1, n - 1]) {
        if (m <= x || m > n) continue;
        const p = consistencyProof(m, n, src);
        expect(verifyConsistency(m, n, p, rootAt(m, src), root)).toBe(true);
        expect(verifyConsistency(m, n, p, rootAt(m, sourceWith(x + 1 < m ? x + 1 : x - 1)), root)).toBe(false);
      }
    }
  });
});
