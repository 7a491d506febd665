/**
 * Verification hashes envelopes and Merkle subtrees either with the ledger kernels addon (libs/ledger/native,
 * built by `npm run build`) or through node:crypto. These tests need the addon (they fail, never skip, without it)
 * and hold both ways equal: the addon's digests against node:crypto's, and whole verifications, intact and tampered,
 * with checkpoints inside chunks and on their edges, inline and on workers.
 */
import { createHash, randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { LedgerHome, jsKernels, nativeKernelsStatus, nativeKernels, type VerifyKernels, type VerificationReport, initLedgerHome } from '@assay/ledger';
import { makeTmpDir } from '../support/ledger-fixtures';
import { copyHome, deps, tamper, verifyHome } from '../support/ledger-home-fixtures';

jest.setTimeout(120_000);

function addon(): VerifyKernels {
  const h = nativeKernels();
  if (!h) throw new Error(`the ledger kernels addon is not available: ${nativeKernelsStatus().why}`);
  return h;
}

function packed(lengths: number[]): { bytes: Uint8Array; offsets: Uint32Array } {
  const offsets = new Uint32Array(lengths.length + 1);
  lengths.forEach((l, i) => (offsets[i + 1] = (offsets[i] as number) + l));
  return { bytes: randomBytes(offsets[lengths.length] as number), offsets };
}

describe('the ledger kernels addon', () => {
  it("gives node:crypto's envelope and leaf hashes for every length, stride and offset", () => {
    const lengths = [0, 1, 31, 32, 33, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129, 543, 1000, 70_000];
    for (let k = 0; k < 40; k++) lengths.push(Math.floor(Math.random() * 3000));
    const { bytes, offsets } = packed(lengths);
    for (const [stride, at] of [
      [64, 0],
      [96, 32],
      [100, 5],
    ] as const) {
      const a = new Uint8Array(stride * lengths.length).fill(0xee);
      const b = new Uint8Array(stride * lengths.length).fill(0xee);
      addon().digestAll(bytes, offsets, a, stride, at);
      jsKernels.digestAll(bytes, offsets, b, stride, at);
      expect(Buffer.from(a).equals(Buffer.from(b))).toBe(true);
      // Spot-check against the definitions, not only against the other implementation.
      const i = 10;
      const ev = bytes.subarray(offsets[i] as number, offsets[i + 1] as number);
      expect(Buffer.from(a.subarray(stride * i + at, stride * i + at + 32))).toEqual(createHash('sha256').update(ev).digest());
      expect(Buffer.from(a.subarray(stride * i + at + 32, stride * i + at + 64))).toEqual(
        createHash('sha256')
          .update(Buffer.from([0]))
          .update(ev)
          .digest(),
      );
      // Bytes outside each event's 64 are left alone.
      if (at > 0) expect(a[0]).toBe(0xee);
    }
  });

  it('gives the RFC 9162 hash of perfect subtrees of 1 to 1024 leaves', () => {
    const leaves = randomBytes(96 * 1024);
    for (const count of [1, 2, 4, 8, 64, 512, 1024])
      expect(Buffer.from(addon().subtreeRoot(leaves, 96, 64, count))).toEqual(Buffer.from(jsKernels.subtreeRoot(leaves, 96, 64, count)));
  });

  it('refuses bad arguments with a code, writing nothing', () => {
    const { bytes, offsets } = packed([10, 20, 30]);
    const out = new Uint8Array(96 * 3);
    const refusal = (f: () => unknown): { name: string; code: string; message: string } => {
      try {
        f();
      } catch (e) {
        const err = e as Error & { code: string };
        return { name: err.name, code: err.code, message: err.message };
      }
      throw new Error('expected a refusal');
    };
    const h = addon();
    expect(refusal(() => h.digestAll(bytes, new Uint32Array([0, 20, 10, 60]), out, 96, 32))).toEqual({
      name: 'RangeError',
      code: 'ASSAY_KERNELS_ARGUMENT',
      message: 'offsets must not decrease',
    });
    expect(refusal(() => h.digestAll(bytes, new Uint32Array([0, 10, 30, 61]), out, 96, 32)).message).toBe('offsets point past the end of bytes');
    expect(refusal(() => h.digestAll(bytes, offsets, new Uint8Array(96 * 2), 96, 32)).message).toBe("out is too small for every event's two digests");
    expect(refusal(() => h.digestAll(bytes, offsets, out, 96, 40)).message).toBe('stride must be at least 64 and at + 64 must fit in it');
    expect(refusal(() => h.digestAll(bytes, [0, 10] as unknown as Uint32Array, out, 96, 32))).toMatchObject({
      name: 'TypeError',
      code: 'ASSAY_KERNELS_ARGUMENT',
    });
    expect(refusal(() => h.digestAll('bytes' as unknown as Uint8Array, offsets, out, 96, 32)).message).toBe('bytes must be a Uint8Array');
    expect(refusal(() => h.digestAll(bytes, offsets, out, -1, 0)).message).toBe('stride must be an integer from 0 to 2^32 - 1');
    expect(out.every((b) => b === 0)).toBe(true);
    expect(refusal(() => h.subtreeRoot(out, 96, 64, 3)).message).toBe('count must be a power of two');
    const scan = h.scanEnvelopes as NonNullable<VerifyKernels['scanEnvelopes']>;
    const meta = new Float64Array(30);
    expect(refusal(() => scan(bytes, offsets, meta, new Uint8Array(192), bytes, new Uint8Array(288), 96, 0)).message).toBe('signing must not overlap bytes');
    expect(refusal(() => scan(bytes, offsets, new Float64Array(29), new Uint8Array(192), new Uint8Array(60), new Uint8Array(288), 96, 0)).message).toBe(
      'meta is too small (10 numbers an event)',
    );
    expect(refusal(() => scan(bytes, offsets, meta, new Uint8Array(192), new Uint8Array(60), new Uint8Array(288), 96, 70)).message).toBe(
      'prevAt + 32 must fit in stride',
    );
    expect(refusal(() => h.subtreeRoot(out, 96, 64, 4)).message).toBe('leaves is too small for count leaf hashes');
  });
});

describe('verification with the addon and with node:crypto', () => {
  let tmp: { dir: string; cleanup(): void };
  let home: string;
  let total: number;
  let checkpoints: number;
  const cpSizes = [16, 21, 24, 40, 64];

  beforeAll(async () => {
    tmp = makeTmpDir('assay-verify-kernels-');
    home = join(tmp.dir, 'home');
    const d = deps();
    await initLedgerHome(home, { ...d, origin: 'assay.test/ledger' });
    const h = new LedgerHome(home, d);
    try {
      // Checkpoints on chunk edges (16, 24, 40, 64 with chunks of 8) and inside a chunk (21), then a partial last chunk.
      for (const size of [...cpSizes, 75]) {
        while ((await h.db.events.size()) < size)
          await h.ledger.append(`note-${(await h.db.events.size()) % 3}`, [{ type: 'Note', data: { text: `note ${await h.db.events.size()}` } }]);
        if (size !== 75) await h.ledger.checkpoint();
      }
      total = await h.db.events.size();
      checkpoints = h.db.checkpoints.all().length;
    } finally {
      await h.close();
    }
  });
  afterAll(() => tmp.cleanup());

  const ways: Array<[string, { workers: number; chunkSize?: number; kernels?: VerifyKernels; mainThread?: boolean }, Record<string, string>]> = [
    ['inline, addon', { workers: 0 }, {}],
    ['inline, node:crypto', { workers: 0, kernels: jsKernels }, {}],
    ['this thread and a worker, chunks of 8, addon', { workers: 2, chunkSize: 8 }, {}],
    ['this thread and 2 workers, chunks of 8, node:crypto everywhere', { workers: 3, chunkSize: 8, kernels: jsKernels }, { ASSAY_NATIVE_LEDGER: '0' }],
    ['2 workers only, chunks of 8, addon', { workers: 2, chunkSize: 8, mainThread: false }, {}],
    ['this thread and a worker, chunks of 6 (no whole subtrees)', { workers: 2, chunkSize: 6 }, {}],
  ];

  /** A verification the given way; env is what the workers see when they start. */
  async function verifyWay(at: string, opts: (typeof ways)[number][1], env: Record<string, string>): Promise<VerificationReport> {
    const saved = { ...process.env };
    Object.assign(process.env, env);
    try {
      return await verifyHome(at, opts);
    } finally {
      for (const k of Object.keys(env))
        if (saved[k] === undefined) delete process.env[k];
        else process.env[k] = saved[k];
    }
  }
  const essence = (r: VerificationReport) => ({ ok: r.ok, events: r.events, treeSize: r.treeSize, root: r.root, failure: r.failure, steps: r.steps });

  it('agree on an intact ledger, every checkpoint matching', async () => {
    addon();
    expect(total).toBe(75);
    const reports = [];
    for (const [, opts, env] of ways) reports.push(essence(await verifyWay(home, opts, env)));
    expect(reports[0]?.ok).toBe(true);
    expect(reports[0]?.steps.find((s) => s.name === 'checkpoints')?.checked).toBe(checkpoints);
    expect(checkpoints).toBeGreaterThanOrEqual(cpSizes.length);
    for (const r of reports) expect(r).toEqual(reports[0]);
  });

  it('agree on the first bad event, the events before it and their root, for damage inside a whole chunk', async () => {
    for (const pos of [9, 13, 15, 17, 20, 22, 47, 70]) {
      const copy = join(tmp.dir, `tampered-${pos}`);
      copyHome(home, copy);
      tamper(copy, (db) => {
        const row = db.prepare('SELECT bytes FROM events WHERE position = ?').get(pos) as { bytes: Buffer };
        const bytes = Buffer.from(row.bytes);
        bytes[bytes.length - 5] = (bytes[bytes.length - 5] as number) ^ 0x01;
        db.prepare('UPDATE events SET bytes = ? WHERE position = ?').run(bytes, pos);
      });
      const reports = [];
      for (const [, opts, env] of ways) reports.push(essence(await verifyWay(copy, opts, env)));
      expect({ pos, ok: reports[0]?.ok, position: reports[0]?.failure?.position, events: reports[0]?.events }).toEqual({
        pos,
        ok: false,
        position: pos,
        events: pos,
      });
      for (const r of reports) expect(r).toEqual(reports[0]);
    }
  });
});
