/**
 * Tar ingestion against the real thing: a tree on disk archived by GNU tar (hard links, long names in PAX and GNU
 * form, a multi-chunk file, a fifo) and ingested into a real FsBlobStore gives the same root CID as snapshotting
 * the same directory from disk with the same policy.
 */
import { spawn } from 'node:child_process';
import { chmodSync, linkSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock } from '@assay/core';
import { CHUNK_SIZE, SnapshotHome, rootfsPolicy } from '@assay/snapshots';

const base = mkdtempSync(join(tmpdir(), 'assay-snap-tar-'));
afterAll(() => rmSync(base, { recursive: true, force: true }));

function tarStream(dir: string, format: 'pax' | 'gnu'): AsyncIterable<Uint8Array> {
  const p = spawn('tar', ['-C', dir, `--format=${format}`, '-cf', '-', '.'], { stdio: ['ignore', 'pipe', 'inherit'] });
  return p.stdout;
}

function tree(dir: string): void {
  mkdirSync(join(dir, 'src/deep'), { recursive: true });
  mkdirSync(join(dir, 'empty'));
  writeFileSync(join(dir, 'README'), 'hello\n');
  writeFileSync(join(dir, 'run.sh'), '#!/bin/sh\necho hi\n');
  chmodSync(join(dir, 'run.sh'), 0o750);
  const big = Buffer.alloc(CHUNK_SIZE * 3 + 17);
  for (let i = 0; i < big.length; i++) big[i] = (i * 7 + (i >> 12)) & 255;
  writeFileSync(join(dir, 'src/big.bin'), big);
  writeFileSync(join(dir, 'src/ünïcödé.txt'), 'u');
  writeFileSync(join(dir, 'src/deep', `${'n'.repeat(120)}.txt`), 'long name');
  linkSync(join(dir, 'README'), join(dir, 'src/README.hard'));
  symlinkSync('../README', join(dir, 'src/readme.link'));
  symlinkSync('/usr/bin/python3', join(dir, 'python'));
  writeFileSync(join(dir, 'src/x.pyc'), 'bytecode');
  execFileSync('mkfifo', [join(dir, 'pipe')]);
}

describe('ingestTar (GNU tar, FsBlobStore)', () => {
  it('gives the same root CID as the disk snapshot, for PAX and GNU archives', async () => {
    const dir = join(base, 'tree');
    mkdirSync(dir);
    tree(dir);
    const policy = { exclude: ['*.pyc'], specialFiles: 'skip' as const };
    const h = new SnapshotHome(join(base, 'home'), { clock: new ManualClock('2099-01-01T00:00:00.000Z'), durability: 'none' });
    try {
      const disk = await h.create(dir, { policy, previous: null, label: null, useCache: false });
      for (const format of ['pax', 'gnu'] as const) {
        const t = await h.ingestTar(tarStream(dir, format), { policy, previous: null, label: null });
        expect(t.rootCid).toBe(disk.rootCid);
        expect([t.files, t.directories, t.symlinks, t.bytes]).toEqual([disk.files, disk.directories, disk.symlinks, disk.bytes]);
        expect(t.skippedSpecialFiles).toEqual(['pipe']);
        expect((await h.verify(t.root)).files).toBe(disk.files);
      }
      // the rootfs defaults change the policy (and so the digest), not the walk's rules
      const r = await h.ingestTar(tarStream(dir, 'pax'), { policy: rootfsPolicy(policy), previous: null, label: null });
      expect(r.rootCid).toBe(disk.rootCid);
      expect(r.policyDigest).not.toBe(disk.policyDigest);
    } finally {
      await h.close();
    }
  });
});
