/**
 * digestDirectory (libs/snapshots/src/home/snapshot-home.ts): the root CID a snapshot of a directory would have,
 * with no Assay home and nothing written. Task digests (`assay task show`, `assay task import`, `assay baseline ls
 * --task`, a re-judge's task check) are computed with it, so it must agree with a snapshot actually taken.
 */
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock } from '@assay/core';
import { SnapshotHome, digestDirectory } from '@assay/snapshots';

describe('digestDirectory', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'assay-digest-dir-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  function tree(root: string): void {
    mkdirSync(join(root, 'tests', 'deep'), { recursive: true });
    writeFileSync(join(root, 'instruction.md'), 'Make it faster.\n');
    writeFileSync(join(root, 'tests', 'test.sh'), '#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n', { mode: 0o755 });
    writeFileSync(join(root, 'tests', 'deep', 'big.bin'), Buffer.alloc(3 * 1024 * 1024 + 17, 7));
    symlinkSync('instruction.md', join(root, 'link'));
  }

  it('gives the root CID of the snapshot a store would take of the same tree, and writes nothing', async () => {
    const task = join(dir, 'task');
    const home = join(dir, 'home');
    tree(task);
    mkdirSync(home);
    const digest = await digestDirectory(task, { clock: new ManualClock('2026-06-01T08:00:00.000Z') });
    expect(readdirSync(home)).toEqual([]);
    expect(readdirSync(dir).sort()).toEqual(['home', 'task']);

    const store = new SnapshotHome(home, { durability: 'none' });
    try {
      const taken = await store.create(task, { previous: null, label: null });
      expect(digest).toBe(taken.rootCid);
      await expect(store.digest(task)).resolves.toBe(digest); // the Judge's and the run's digests go through it
    } finally {
      await store.close();
    }
    // the same without the native lister and with hashing on the calling thread
    await expect(digestDirectory(task, { workers: 0, nativeLister: false })).resolves.toBe(digest);
  });

  it('changes when a byte or a mode changes', async () => {
    const task = join(dir, 'task');
    tree(task);
    const before = await digestDirectory(task);
    writeFileSync(join(task, 'instruction.md'), 'Make it faster!\n');
    const edited = await digestDirectory(task);
    expect(edited).not.toBe(before);
    writeFileSync(join(task, 'instruction.md'), 'Make it faster.\n');
    expect(await digestDirectory(task)).toBe(before);
    chmodSync(join(task, 'instruction.md'), 0o755);
    expect(await digestDirectory(task)).not.toBe(before);
  });

  it('refuses what is not a directory, naming it', async () => {
    writeFileSync(join(dir, 'file'), 'x');
    await expect(digestDirectory(join(dir, 'file'))).rejects.toMatchObject({
      code: 'SNAPSHOT_ROOT_INVALID',
      message: expect.stringContaining(join(dir, 'file')),
    });
  });
});
