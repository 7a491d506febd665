import { randomBytes } from 'node:crypto';
import { nodeEd25519 } from '../../crypto/ed25519';
import { firstBadSignature, SignatureChecks, type SignedItem } from './signature-batch';

/** Items signed by a few keys; `bad` lists the indexes whose signature is spoiled (one bit of the signature). */
function items(n: number, bad: readonly number[]): SignedItem[] {
  const seeds = [randomBytes(32), randomBytes(32), randomBytes(32)];
  const keys = seeds.map((s) => nodeEd25519.publicKeyFromSeed(s));
  return Array.from({ length: n }, (_, i) => {
    const k = i % 3;
    const message = Buffer.from(`event ${i} ${'x'.repeat(i % 50)}`);
    const signature = Buffer.from(nodeEd25519.sign(seeds[k] as Uint8Array, message));
    if (bad.includes(i)) signature[i % 64] = (signature[i % 64] as number) ^ 0x10;
    return { key: keys[k] as Uint8Array, message, signature };
  });
}

describe('signature checks on worker threads', () => {
  it('give the same first bad item as this thread, batch by batch, and stop their workers', async () => {
    for (const bad of [[], [0], [777], [1500, 40], [2999]]) {
      const all = items(3000, bad);
      const want = bad.length === 0 ? -1 : Math.min(...bad);
      expect(await firstBadSignature(all, { workers: 0 })).toBe(want);
      expect(await firstBadSignature(all, { workers: 2, batch: 256 })).toBe(want);
    }
  }, 60_000);

  it('a key or signature of the wrong length fails, on a worker too; progress counts every item', async () => {
    const all = items(20, []);
    const short = { ...(all[5] as SignedItem), signature: (all[5] as SignedItem).signature.subarray(0, 63) };
    const noKey = { ...(all[9] as SignedItem), key: new Uint8Array(31) };
    const seen: number[] = [];
    const checks = new SignatureChecks({ workers: 1, batch: 8, progress: (d) => seen.push(d) });
    try {
      [...all.slice(0, 5), short, ...all.slice(6, 9), noKey, ...all.slice(10)].forEach((it) => checks.add(it));
      expect(await checks.firstBad()).toBe(5);
    } finally {
      await checks.close();
    }
    expect(Math.max(...seen)).toBe(20);
    expect(await firstBadSignature([noKey], { workers: 1 })).toBe(0);
  }, 60_000);
});
