/**
 * Checkouts keep sparse files sparse and count their apparent size against the limits: a snapshot of a file that is
 * mostly holes (an agent's `truncate -s 6G`) costs the disk of whoever checks it out what the file holds, not its
 * apparent size, and the policy's size limits still see the apparent size.
 */
import { closeSync, ftruncateSync, mkdirSync, openSync, readFileSync, statSync, writeSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { ManualClock } from '@assay/core';
import { parseCid, SnapshotHome } from '@assay/snapshots';
import { scratchDirs } from './support/scratch';

const { fresh } = scratchDirs('assay-snap-sparse-');
const MiB = 1048576;

function sparseTree(): string {
  const dir = fresh('ws');
  mkdirSync(dir, { recursive: true });
  const fd = openSync(join(dir, 'sparse.bin'), 'w');
  ftruncateSync(fd, 96 * MiB);
  writeSync(fd, Buffer.from('data in the middle'), 0, 18, 40 * MiB + 3);
  writeSync(fd, Buffer.from('and at the end'), 0, 14, 96 * MiB - 14);
  closeSync(fd);
  const tail = openSync(join(dir, 'holes-at-end.bin'), 'w');
  writeSync(tail, Buffer.from('head'), 0, 4, 0);
  ftruncateSync(tail, 8 * MiB);
  closeSync(tail);
  return dir;
}

/** A path to check out into (its parent exists). */
const target = (name: string) => {
  const parent = fresh('out');
  mkdirSync(parent, { recursive: true });
  return join(parent, name);
};

const sha = (f: string) => createHash('sha256').update(readFileSync(f)).digest('hex');

describe('checkout of sparse files', () => {
  it('keeps them sparse: same bytes, next to nothing allocated', async () => {
    const src = sparseTree();
    const home = new SnapshotHome(fresh('home'), { clock: new ManualClock('2099-01-01T00:00:00.000Z'), durability: 'none' });
    try {
      const snap = await home.create(src, { previous: null, label: null });
      const out = target('co');
      const r = await home.checkout(parseCid(snap.rootCid), out);
      expect(r.bytes).toBe(96 * MiB + 8 * MiB);
      for (const f of ['sparse.bin', 'holes-at-end.bin']) {
        const a = statSync(join(src, f));
        const b = statSync(join(out, f));
        expect(b.size).toBe(a.size);
        expect(b.blocks * 512).toBeLessThan(1 * MiB); // (before: the whole apparent size was written)
        expect(sha(join(out, f))).toBe(sha(join(src, f)));
      }
    } finally {
      await home.close();
    }
  });

  it('counts the apparent size against the limits', async () => {
    const src = sparseTree();
    const home = new SnapshotHome(fresh('home'), { clock: new ManualClock('2099-01-01T00:00:00.000Z'), durability: 'none' });
    try {
      const snap = await home.create(src, { previous: null, label: null });
      await expect(home.checkout(parseCid(snap.rootCid), target('co'), { policy: { maxTotalBytes: 50 * MiB } })).rejects.toMatchObject({
        code: 'SNAPSHOT_TOO_LARGE',
      });
      await expect(home.checkout(parseCid(snap.rootCid), target('co2'), { policy: { maxFileBytes: 50 * MiB } })).rejects.toMatchObject({
        code: 'SNAPSHOT_FILE_TOO_LARGE',
      });
    } finally {
      await home.close();
    }
  });
});
