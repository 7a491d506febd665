import { createHash } from 'node:crypto';
import { RootAccumulator } from './root-accumulator';
import { emptyRoot, leafHash, nodeHash } from './merkle';

/** RFC 9162 MTH straight from its definition (recursive split at the largest power of two below n). */
function mth(leaves: Buffer[]): Buffer {
  if (leaves.length === 0) return emptyRoot();
  if (leaves.length === 1) return leaves[0] as Buffer;
  let k = 1;
  while (k * 2 < leaves.length) k *= 2;
  return nodeHash(mth(leaves.slice(0, k)), mth(leaves.slice(k)));
}

const leaves = Array.from({ length: 70 }, (_, i) => leafHash(createHash('sha256').update(`event ${i}`).digest()));

describe('RootAccumulator', () => {
  it('gives the RFC 9162 root after every leaf', () => {
    const acc = new RootAccumulator();
    expect(acc.root()).toEqual(emptyRoot());
    leaves.forEach((l, i) => {
      acc.push(l);
      expect(acc.size).toBe(i + 1);
      expect(acc.root()).toEqual(mth(leaves.slice(0, i + 1)));
    });
  });

  it('takes aligned perfect subtrees, mixed with single leaves, with the same roots', () => {
    // 0..7 as one subtree of 8, 8..9 as one of 2, 10 and 11 as leaves, 12..15 as one of 4, 16..31 as 16, 32..63 as 32.
    const acc = new RootAccumulator();
    const plan = [8, 2, 1, 1, 4, 16, 32];
    let at = 0;
    for (const size of plan) {
      acc.pushSubtree(size, mth(leaves.slice(at, at + size)));
      at += size;
      expect(acc.size).toBe(at);
      expect(acc.root()).toEqual(mth(leaves.slice(0, at)));
    }
    for (; at < leaves.length; at++) acc.push(leaves[at] as Buffer);
    expect(acc.root()).toEqual(mth(leaves));
  });

  it('refuses a subtree that is not a power of two or not aligned, and changes nothing', () => {
    const acc = new RootAccumulator();
    acc.push(leaves[0] as Buffer);
    const before = acc.root();
    expect(() => acc.pushSubtree(2, mth(leaves.slice(1, 3)))).toThrow('a perfect subtree of 2 leaves cannot follow 1 leaves');
    expect(() => acc.pushSubtree(3, mth(leaves.slice(1, 4)))).toThrow(RangeError);
    expect(() => acc.pushSubtree(0, Buffer.alloc(32))).toThrow(RangeError);
    expect(acc.size).toBe(1);
    expect(acc.root()).toEqual(before);
  });
});
