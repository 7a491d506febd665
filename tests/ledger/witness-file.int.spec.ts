/**
 * `checkpoint.last` is written durably: a temporary file beside it is written and fsynced, renamed over the file,
 * then the directory is fsynced (so the rename survives a power loss); a failed write leaves the old file and no
 * temporary file behind.
 */
import fs from 'node:fs';
import { join } from 'node:path';
import { ManualClock, SequentialIds } from '@assay/core';
import { FileCheckpointWitness, LedgerHome, homePaths, initLedgerHome } from '@assay/ledger';
import { makeTmpDir } from '../support/ledger-fixtures';

describe('checkpoint.last (FileCheckpointWitness)', () => {
  let tmp: { dir: string; cleanup(): void };
  beforeEach(() => {
    tmp = makeTmpDir('assay-witness-');
  });
  afterEach(() => {
    jest.restoreAllMocks();
    tmp.cleanup();
  });

  const cp = (n: number) => ({
    treeSize: n,
    rootHash: Buffer.alloc(32, n).toString('base64'),
    note: `o\n${n}\n${Buffer.alloc(32, n).toString('base64')}\n\n— k AAAA\n`,
  });

  it('fsyncs the temporary file, renames it over the witness, then fsyncs the directory', () => {
    const path = join(tmp.dir, 'checkpoint.last');
    const w = new FileCheckpointWitness(path);
    w.save(cp(1));
    const calls: string[] = [];
    const fds = new Map<number, string>();
    const open = fs.openSync;
    jest.spyOn(fs, 'openSync').mockImplementation(((p: fs.PathLike, flags?: fs.OpenMode, mode?: fs.Mode | null) => {
      const fd = open(p, flags ?? 'r', mode);
      fds.set(fd, String(p) === tmp.dir ? 'dir' : String(p).startsWith(`${path}.tmp-`) ? 'tmp' : String(p));
      calls.push(`open ${fds.get(fd)}`);
      return fd;
    }) as typeof fs.openSync);
    const fsync = fs.fsyncSync;
    jest.spyOn(fs, 'fsyncSync').mockImplementation((fd: number) => {
      calls.push(`fsync ${fds.get(fd)}`);
      fsync(fd);
    });
    const rename = fs.renameSync;
    jest.spyOn(fs, 'renameSync').mockImplementation((a: fs.PathLike, b: fs.PathLike) => {
      calls.push(`rename ${String(a).startsWith(`${path}.tmp-`) ? 'tmp' : String(a)} -> ${String(b) === path ? 'witness' : String(b)}`);
      rename(a, b);
    });
    w.save(cp(2));
    expect(calls).toEqual(['open tmp', 'fsync tmp', 'rename tmp -> witness', 'open dir', 'fsync dir']);
    expect(w.load()).toEqual(cp(2));
    expect(fs.readdirSync(tmp.dir)).toEqual(['checkpoint.last']);
  });

  it('a write that fails leaves the previous witness whole and no temporary file', () => {
    const path = join(tmp.dir, 'checkpoint.last');
    const w = new FileCheckpointWitness(path);
    w.save(cp(1));
    jest.spyOn(fs, 'renameSync').mockImplementation(() => {
      throw Object.assign(new Error('EIO: i/o error, rename'), { code: 'EIO' });
    });
    expect(() => w.save(cp(2))).toThrow(/EIO/);
    jest.restoreAllMocks();
    expect(w.load()).toEqual(cp(1));
    expect(fs.readdirSync(tmp.dir)).toEqual(['checkpoint.last']);
  });
});

describe("a home's ledger signing as other roles (LedgerHome.ledgerSigningAs, the Judge's recorder)", () => {
  it('holds only those keys and still sees the checkpoint witness: a database restored from before a checkpoint is caught', async () => {
    const tmp = makeTmpDir('assay-witness-roles-');
    try {
      const home = join(tmp.dir, 'home');
      const deps = { clock: new ManualClock('2026-05-01T00:00:00.000Z'), ids: new SequentialIds() };
      await initLedgerHome(home, { ...deps, origin: 'assay.test/witness-roles' });
      const p = homePaths(home);
      const older = join(tmp.dir, 'ledger.db.older');
      fs.copyFileSync(p.db, older); // a backup from before the next checkpoint
      const h = new LedgerHome(home, deps);
      await h.ledger.append('note-w', [{ type: 'Note', data: { text: 'after the backup' } }]);
      const signed = await h.ledger.checkpoint();
      await h.close();
      for (const f of fs.readdirSync(p.ledgerDir)) if (f.startsWith('ledger.db-')) fs.rmSync(join(p.ledgerDir, f));
      fs.copyFileSync(older, p.db); // the database restored; checkpoint.last still says what was signed

      const restored = new LedgerHome(home, deps);
      try {
        const judge = restored.ledgerSigningAs(['runtime', 'judge']);
        expect(judge.key('controller')).toBeUndefined();
        expect(judge.key('judge')?.role).toBe('judge');
        expect(judge.key('runtime')?.role).toBe('runtime');
        expect(restored.db.checkpoints.latest()!.treeSize).toBeLessThan(signed.treeSize);
        expect(judge.lastSigned()?.treeSize).toBe(signed.treeSize);
        expect(judge.lastSigned()?.treeSize).toBe(restored.ledger.lastSigned()?.treeSize);
      } finally {
        await restored.close();
      }
    } finally {
      tmp.cleanup();
    }
  });
});
