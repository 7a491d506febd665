/** `assay snapshot create` records SnapshotTaken and WorkspaceEdited in the ledger, and the ledger still verifies. */
import { appendFileSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { assay } from '../support/cli';
import { makeTmpDir } from '../support/ledger-fixtures';

describe('snapshots recorded in the ledger (CLI)', () => {
  let tmp: { dir: string; cleanup(): void };
  beforeAll(() => {
    tmp = makeTmpDir('assay-snap-ledger-');
  });
  afterAll(() => tmp.cleanup());

  it('appends SnapshotTaken for each snapshot and WorkspaceEdited for what changed between them', async () => {
    const home = join(tmp.dir, 'home');
    const ws = join(tmp.dir, 'ws');
    mkdirSync(join(ws, 'sub'), { recursive: true });
    writeFileSync(join(ws, 'optimizer.py'), 'lr = 0.1\n');
    writeFileSync(join(ws, 'sub', 'notes.txt'), 'x\n');
    symlinkSync('/etc/passwd', join(ws, 'escape'));

    const without = await assay(['snapshot', 'create', ws], home);
    expect(without.code).toBe(0);
    expect(without.stderr).toMatch(/no ledger in .*; SnapshotTaken not recorded/);

    expect((await assay(['ledger', 'init'], home)).code).toBe(0);
    const first = await assay(['snapshot', 'create', ws], home);
    expect(first.code).toBe(0);
    const root1 = first.stdout.split('\n')[0] as string;
    appendFileSync(join(ws, 'optimizer.py'), 'momentum = 0.9\n');
    const second = await assay(['snapshot', 'create', ws], home);
    const root2 = second.stdout.split('\n')[0] as string;
    expect(root2).not.toBe(root1);

    const events = (await assay(['ledger', 'events', '--stream', 'snapshot-cli', '--json'], home)).stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { type: string; signer: string; data: Record<string, unknown> });
    expect(events.map((e) => e.type)).toEqual(['SnapshotTaken', 'SnapshotTaken', 'WorkspaceEdited']);
    expect(events[0]?.data).toMatchObject({ root: root1, files: 2, symlinks: 1, flagged: ['escape'], policyDigest: expect.any(String) });
    expect(events[0]?.signer).toMatch(/^assay-runtime-/);
    expect(events[2]?.data).toMatchObject({
      from: root1,
      to: root2,
      changed: 1,
      added: 0,
      removed: 0,
      paths: { changed: ['optimizer.py'], added: [], removed: [] },
    });
    const v = await assay(['ledger', 'verify'], home);
    expect([v.code, v.stderr]).toEqual([0, '']);
  }, 60_000);
});
