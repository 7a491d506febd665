/**
 * The newer commands run in this process (runCli with a capturing context), on a real sample home: result bundles
 * (export, verify, witness policies, equivocation reports, logs refused), projections (leaderboard, report), run
 * views with their baseline line, baselines, re-judging's refusals and task import. The end-to-end suites run the
 * same commands as child processes; these check the in-process paths and their exit codes.
 */
import { assayInProcess } from '../support/cli';
import { cpSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LedgerHome, type SigningKey } from '@assay/ledger';
import { REPO_ROOT } from '../support/child-process';
import { describeDocker } from '../support/docker';
import { buildSampleHome, deps } from '../support/ledger-home-fixtures';

jest.setTimeout(180_000);

const RUN = 'r-20261202-0001';

const cli = assayInProcess;

describe('newer commands, in process', () => {
  let dir: string;
  let home: string;
  let root: string;
  let rootFile: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'assay-cli-inprocess-'));
    home = join(dir, 'home');
    await buildSampleHome(home);
    const h = new LedgerHome(home, deps());
    try {
      root = (h.ledger.key('controller') as SigningKey).publicKeyText;
      await h.ledger.checkpoint();
    } finally {
      await h.close();
    }
    rootFile = join(dir, 'root.pub');
    writeFileSync(rootFile, `${root}\n`);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('bundle export and verify: text and JSON, a witness policy nobody cosigned, logs that are not there', async () => {
    const file = join(dir, 'run.bundle');
    const ex = await cli(['bundle', 'export', RUN, '-o', file, '--snapshots', 'none'], home);
    expect([ex.code, ex.err]).toEqual([0, '']);
    expect(ex.out).toMatch(/^bundle {4}.*run\.bundle/m);
    expect(ex.out).toMatch(/^logs {6}none carried/m);
    const exJson = await cli(['bundle', 'export', RUN, '-o', join(dir, 'run2.bundle'), '--snapshots', 'none', '--json'], home);
    expect(JSON.parse(exJson.out)).toMatchObject({ run: RUN, events: expect.any(Number) });
    const v = await cli(['verify', file, '--trusted-key', rootFile], join(dir, 'nohome'));
    expect(v.code).toBe(0);
    expect(v.out).toMatch(/^ok {6}logs {8}0$/m);
    expect(v.out).toMatch(/^valid: run r-20261202-0001 completed, round 5/m);
    const vJson = await cli(['verify', file, '--trusted-key', root, '--json'], join(dir, 'nohome'));
    expect(JSON.parse(vJson.out)).toMatchObject({ verdict: 'valid', witnesses: null });
    expect((await cli(['verify', file], join(dir, 'nohome'))).code).toBe(6);
    // a policy of one witness who never cosigned
    const w = await cli(['keys', 'generate', '--role', 'auditor', '-o', join(dir, 'w'), '--name', 'witness-a'], join(dir, 'nohome'));
    expect(w.code).toBe(0);
    const keyFile = join(dir, 'w', readdirSync(join(dir, 'w')).find((f) => f.endsWith('.key')) as string);
    const wk = await cli(['checkpoint', 'witness-key', '--key', keyFile], join(dir, 'nohome'));
    expect(wk.code).toBe(0);
    const policy = join(dir, 'policy.json');
    writeFileSync(policy, JSON.stringify({ format: 'assay-witness-policy/v1', quorum: 1, witnesses: [wk.out.trim()] }));
    const unmet = await cli(['verify', file, '--trusted-key', rootFile, '--witness-policy', policy], join(dir, 'nohome'));
    expect([unmet.code, unmet.out]).toEqual([5, expect.stringMatching(/INVALID: step checkpoint: BUNDLE_WITNESS_QUORUM: the checkpoint is cosigned by 0/)]);
    // an equivocation report that proves nothing (the same checkpoint twice)
    const note = (await cli(['ledger', 'checkpoint', '--json'], home)).out;
    const cp = (JSON.parse(note) as { note: string }).note;
    const report = join(dir, 'eq.json');
    writeFileSync(report, JSON.stringify({ format: 'assay-equivocation/v1', origin: cp.split('\n')[0], checkpoints: [cp, cp] }));
    const eq = await cli(['verify', report, '--trusted-key', rootFile], join(dir, 'nohome'));
    expect([eq.code, eq.out]).toEqual([5, expect.stringMatching(/^INVALID: step equivocation: not proven/)]);
    // the sample run's logs are not in its run directory: nothing is published
    const logs = await cli(['bundle', 'export', RUN, '-o', join(dir, 'logs.bundle'), '--logs', 'full'], home);
    expect([logs.code, logs.err]).toEqual([3, expect.stringMatching(/^assay: error BUNDLE_LOG_MISSING: /)]);
    expect((await cli(['bundle', 'export', RUN, '-o', join(dir, 'x.bundle'), '--logs', 'some'], home)).code).toBe(2);
    expect((await cli(['bundle', 'export', RUN, '-o', join(dir, 'x.bundle'), '--cosigned'], home)).code).toBe(2);
  });

  it('run views with the baseline line, baselines, leaderboard and report', async () => {
    const st = await cli(['run', 'status', RUN], home);
    expect(st.code).toBe(0);
    expect(st.out).toMatch(/^baseline {2}no matched baseline/m);
    expect(JSON.parse((await cli(['run', 'status', RUN, '--json'], home)).out)).toMatchObject({ baseline: { matched: false } });
    const bl = await cli(['baseline', 'ls'], home);
    expect(bl.code).toBe(0);
    expect(JSON.parse((await cli(['baseline', 'ls', '--json'], home)).out)).toEqual(expect.anything());
    const lb = await cli(['leaderboard', 'assay/tiny-optimizer'], home);
    expect(lb.code).toBe(0);
    expect(lb.out).toContain(RUN);
    expect(JSON.parse((await cli(['leaderboard', 'assay/tiny-optimizer', '--json'], home)).out)).toEqual(expect.anything());
    const rep = await cli(['report', RUN], home);
    expect(rep.code).toBe(0);
    expect(JSON.parse((await cli(['report', RUN, '--json'], home)).out)).toEqual(expect.anything());
    expect((await cli(['report', 'no-such-run'], home)).code).toBe(3);
  });

  it('rejudge refuses before judging: bad options, an untrusted key, a task that is not the claimed one', async () => {
    const file = join(dir, 'rj.bundle');
    expect((await cli(['bundle', 'export', RUN, '-o', file, '--snapshots', 'none'], home)).code).toBe(0);
    const task = join(REPO_ROOT, 'examples/tasks/tiny-optimizer');
    const other = join(dir, 'other-home');
    expect((await cli(['ledger', 'init'], other)).code).toBe(0);
    expect((await cli(['rejudge', file, '--task', task, '--repeat', '0', '--trusted-key', rootFile], other)).code).toBe(2);
    expect((await cli(['rejudge', file, '--task', task, '--tolerance', 'x', '--trusted-key', rootFile], other)).code).toBe(2);
    expect((await cli(['rejudge', file, '--task', task], other)).code).toBe(6);
    const changed = join(dir, 'task-copy');
    cpSync(task, changed, { recursive: true });
    writeFileSync(join(changed, 'tests', 'extra.txt'), 'one more hidden file\n');
    const mismatch = await cli(['rejudge', file, '--task', changed, '--trusted-key', rootFile, '--json'], other);
    expect(mismatch.code).toBe(5);
  });
});

describeDocker('task import, in process (Docker)', () => {
  it('records a task whose images are local, once', async () => {
    const home = mkdtempSync(join(tmpdir(), 'assay-cli-import-'));
    try {
      expect((await cli(['ledger', 'init'], home)).code).toBe(0);
      const task = join(REPO_ROOT, 'examples/tasks/tiny-optimizer');
      const r = await cli(['task', 'import', task], home);
      expect([r.code, r.err]).toEqual([0, '']);
      expect(r.out).toMatch(/^ledger {4}TaskRegistered@\d+ \(task-assay\.tiny-optimizer\)$/m);
      expect((await cli(['task', 'import', task], home)).out).toMatch(/recorded before$/m);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});
