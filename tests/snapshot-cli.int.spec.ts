import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command } from 'commander';
import { silentProgress } from '@assay/core';
import { MemoryEventSink } from '@assay/snapshots';
import type { CliContext } from '../apps/cli/src/cli-context';
import { reportError } from '../apps/cli/src/main';
import { register, setSnapshotEventSink } from '../apps/cli/src/commands/snapshot.commands';

const base = mkdtempSync(join(tmpdir(), 'assay-snap-cli-'));
afterAll(() => rmSync(base, { recursive: true, force: true }));

interface Run {
  code: number;
  out: string;
  err: string;
}

function cli(homeDir: string, sink?: MemoryEventSink) {
  return async (...argv: string[]): Promise<Run> => {
    const out: string[] = [];
    const err: string[] = [];
    const ctx: CliContext = { home: homeDir, out: (t) => out.push(t), err: (t) => err.push(t), progress: () => silentProgress };
    const program = new Command('assay').exitOverride().configureOutput({ writeOut: (s) => out.push(s), writeErr: (s) => err.push(s) });
    register(program, ctx, sink ? { sink } : {});
    let code = 0;
    try {
      await program.parseAsync(argv, { from: 'user' });
    } catch (e) {
      code = reportError(e, ctx);
    }
    return { code, out: out.join('\n'), err: err.join('\n') };
  };
}

describe('assay snapshot', () => {
  const ws = join(base, 'ws');
  mkdirSync(join(ws, 'src'), { recursive: true });
  writeFileSync(join(ws, 'src/main.py'), 'print("hi")\n');
  writeFileSync(join(ws, 'README'), 'readme\n');
  symlinkSync('src/main.py', join(ws, 'entry'));
  const sink = new MemoryEventSink();
  const run = cli(join(base, 'home'), sink);

  let first = '';

  it('create --json stores, pins, emits SnapshotTaken; --dry-run only computes', async () => {
    const dry = await run('snapshot', 'create', ws, '--dry-run', '--json');
    expect(dry.code).toBe(0);
    const d = JSON.parse(dry.out) as { rootCid: string; dryRun: boolean; newBlobs: number };
    expect(d).toMatchObject({ dryRun: true, newBlobs: 0 });
    expect(sink.events).toEqual([]);
    const r = await run('snapshot', 'create', ws, '--json', '--label', 'run-1/ws');
    expect(r.code).toBe(0);
    const j = JSON.parse(r.out) as { rootCid: string; files: number; symlinks: number };
    expect(j).toMatchObject({ rootCid: d.rootCid, files: 2, symlinks: 1 });
    first = j.rootCid;
    expect(sink.events.map((e) => e.type)).toEqual(['SnapshotTaken']);
    const human = await run('snapshot', 'create', ws, '--label', 'run-1/ws');
    expect(human.out.split('\n')[0]).toBe(first);
    expect(human.out).toMatch(/2 files, 1 directories, 1 symlinks, \d+ bytes; 0 new blobs/);
  });

  it('ls, verify, diff, checkout, export, import, gc', async () => {
    writeFileSync(join(ws, 'src/main.py'), 'print("hello")\n');
    writeFileSync(join(ws, 'NEW'), 'new');
    const second = (JSON.parse((await run('snapshot', 'create', ws, '--json', '--label', 'run-1/ws')).out) as { rootCid: string }).rootCid;
    expect(sink.events.map((e) => e.type)).toEqual(['SnapshotTaken', 'SnapshotTaken', 'SnapshotTaken', 'WorkspaceEdited']);

    const ls = await run('snapshot', 'ls', second);
    expect(ls.out).toMatch(/0644 file\s+3 NEW/);
    expect(ls.out).toMatch(/0777 symlink\s+11 entry -> src\/main\.py/);
    expect(ls.out).toMatch(/0755 dir\s+\d+ src\//);
    expect(JSON.parse((await run('snapshot', 'ls', second, 'src/main.py', '--json')).out)).toMatchObject({
      kind: 'file',
      entries: [{ name: 'main.py', size: 15 }],
    });

    const v = await run('snapshot', 'verify', second);
    expect(v.out).toMatch(new RegExp(`^ok ${second}: 3 files`));

    const diff = await run('snapshot', 'diff', first, second);
    expect(diff.out.split('\n')).toEqual([
      '+ NEW (3 bytes)',
      'M src/main.py (12 -> 15 bytes)',
      '2 changes: +1 files (3 bytes), -0 files (0 bytes), 1 changed (12 -> 15 bytes)',
    ]);
    const dj = JSON.parse((await run('snapshot', 'diff', first, second, '--json')).out) as { changes: unknown[]; added: { files: number } };
    expect(dj.changes).toHaveLength(2);
    expect(dj.added.files).toBe(1);

    const out = join(base, 'checkout');
    expect((await run('snapshot', 'checkout', second, out)).code).toBe(0);
    expect(readFileSync(join(out, 'src/main.py'), 'utf8')).toBe('print("hello")\n');

    const car = join(base, 'x.car');
    expect((await run('snapshot', 'export', first, second, '-o', car)).out).toMatch(/blocks/);
    const other = cli(join(base, 'home2'));
    const imp = await other('snapshot', 'import', car, '--json');
    expect(JSON.parse(imp.out)).toMatchObject({ roots: [first, second] });
    expect((await other('snapshot', 'verify', first)).code).toBe(0);

    expect((await run('snapshot', 'pins', '--json')).out).toContain(second);
    expect((await run('snapshot', 'unpin', first)).out).toBe(`unpinned ${first}`);
    const gcDry = JSON.parse((await run('snapshot', 'gc', '--grace', '0', '--dry-run', '--json')).out) as { deleted: number; dryRun: boolean };
    expect(gcDry.dryRun).toBe(true);
    expect(gcDry.deleted).toBeGreaterThan(0);
    const gc = JSON.parse((await run('snapshot', 'gc', '--grace', '0', '--json')).out) as { deleted: number };
    expect(gc.deleted).toBe(gcDry.deleted);
    expect((await run('snapshot', 'verify', second)).code).toBe(0);
  });

  it('turns errors into a code, a message and an exit status', async () => {
    const badCid = await run('snapshot', 'verify', 'nope');
    expect(badCid.code).toBe(2);
    expect(badCid.err).toMatch(/assay: error SNAPSHOT_CID_INVALID: "nope" is not a CID/);
    const missing = await run('snapshot', 'ls', 'bafyreigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi');
    expect(missing.code).toBe(5);
    expect(missing.err).toMatch(/SNAPSHOT_BLOB_MISSING/);
    const limit = await run('snapshot', 'create', ws, '--policy', writePolicy({ maxFiles: 2 }));
    expect(limit.code).toBe(6);
    expect(limit.err).toMatch(/SNAPSHOT_TOO_MANY_FILES: .*policy maxFiles=2/);
    const badPolicy = await run('snapshot', 'create', ws, '--policy', writePolicy({ followSymlinks: true }));
    expect(badPolicy.code).toBe(2);
    expect(badPolicy.err).toMatch(/SNAPSHOT_POLICY_INVALID: policy field "followSymlinks" is unknown/);
    const notEmpty = await run('snapshot', 'checkout', 'bafyreigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi', ws);
    expect(notEmpty.code).toBe(4);
    const noDir = await run('snapshot', 'create', join(base, 'does-not-exist'));
    expect(noDir.code).toBe(2);
    expect(noDir.err).toMatch(/SNAPSHOT_ROOT_INVALID/);
  });

  it('excludes what --exclude says, and works without any sink', async () => {
    setSnapshotEventSink(null);
    const plain = cli(join(base, 'home3'));
    const all = JSON.parse((await plain('snapshot', 'create', ws, '--json')).out) as { files: number };
    const some = JSON.parse((await plain('snapshot', 'create', ws, '--json', '--exclude', 'src/', '--exclude', 'NEW')).out) as { files: number };
    expect(all.files - some.files).toBe(2);
    expect(existsSync(join(base, 'home3', 'blobs', 'store.json'))).toBe(true);
  });
});

let policies = 0;
function writePolicy(p: unknown): string {
  const f = join(base, `policy-${++policies}.json`);
  writeFileSync(f, JSON.stringify(p));
  return f;
}
