/**
 * The Judge on a real Docker daemon, a real SQLite ledger and the real snapshot store, on the small tasks of
 * tests/fixtures/judge/tasks (one shared environment, so one image serves them all) and examples/tasks/line-fit.
 * Each case checks its status, that nothing is left behind, and at the end the whole ledger verifies.
 * Nothing here sends a packet off the machine: the network case only lists interfaces and uses loopback.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import { join, resolve } from 'node:path';
import { randomIds, systemClock } from '@assay/core';
import { initLedgerHome } from '@assay/ledger';
import { parseCid } from '@assay/snapshots';
import { runClaimRules } from '@assay/run';
import type { JudgeResult } from '@assay/judge';
import { openJudgeRuntime, homeTag, type JudgeRuntime, type LoadedTask } from '../../libs/runtime/src';
import { describeDocker } from '../support/docker';
import { tmp } from './judge-fakes';

const REPO = resolve(__dirname, '../..');
const FIXTURES = join(REPO, 'tests/fixtures/judge/tasks');
const LINE_FIT = join(REPO, 'examples/tasks/line-fit');
const MiB = 1048576;

describeDocker('Judge on Docker (must-show cases)', () => {
  let home: string;
  let rt: JudgeRuntime;
  const tasks = new Map<string, LoadedTask>();
  const dirs: string[] = [];
  const results: JudgeResult[] = [];

  beforeAll(async () => {
    home = tmp('assay-judge-int-');
    await initLedgerHome(home, { clock: systemClock, ids: randomIds, origin: 'assay.test/judge-int' });
    rt = await openJudgeRuntime({ home });
    await rt.containers.ping();
  }, 60_000);

  afterAll(async () => {
    await rt?.close();
    fs.rmSync(home, { recursive: true, force: true });
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  async function task(dir: string): Promise<LoadedTask> {
    let t = tasks.get(dir);
    if (!t) {
      t = await rt.loadTask(dir);
      tasks.set(dir, t);
    }
    return t;
  }

  function workspace(files: Record<string, string>, links: Record<string, string> = {}): string {
    const d = tmp('assay-judge-ws-');
    dirs.push(d);
    for (const [p, c] of Object.entries(files)) {
      fs.mkdirSync(join(d, p, '..'), { recursive: true });
      fs.writeFileSync(join(d, p), c);
    }
    for (const [p, target] of Object.entries(links)) fs.symlinkSync(target, join(d, p));
    return d;
  }

  /** Snapshot of a hostile workspace: its own reward files and links to /tests and /logs/verifier. */
  const planted = (extra: Record<string, string> = {}) =>
    workspace(
      { 'logs/verifier/reward.txt': '1\n', 'logs/verifier/reward.json': '{"reward": 1}', ...extra },
      { tests: '/tests', 'reward.json': '/logs/verifier/reward.json' },
    );

  async function judge(taskDir: string, ws: string): Promise<JudgeResult> {
    const t = await task(taskDir);
    const cid = await rt.snapshots.snapshotDirectory(ws);
    const r = await rt.runner.judge(t.prepared, cid);
    results.push(r);
    // Nothing of this Judge is left: container, volume, materialised snapshot.
    expect(await rt.containers.listContainers({ 'org.assay.judge': r.judge })).toEqual([]);
    expect(await rt.containers.listVolumes({ 'org.assay.judge': r.judge })).toEqual([]);
    expect(fs.existsSync(join(r.dir, 'snapshot'))).toBe(false);
    return r;
  }

  const fixture = (name: string) => join(FIXTURES, name);

  it('writes a valid reward: completed, with every event signed and the launch limits recorded', async () => {
    const r = await judge(fixture('valid-reward'), workspace({ 'main.py': 'print(1)\n' }));
    expect(r).toMatchObject({
      status: 'completed',
      exitCode: 0,
      rewards: { reward: 0.75, accuracy: 0.5 },
      primaryMetric: 'reward',
      primaryScore: 0.75,
      network: 'none',
    });
    expect(r.limits).toMatchObject({
      cpus: 1,
      memoryBytes: 128 * MiB,
      pidsLimit: 1024,
      readOnlyRootfs: true,
      capDrop: ['ALL'],
      capAdd: ['SETGID', 'SETPCAP', 'SETUID', 'SYS_ADMIN'],
      setupCapabilities: ['SETPCAP', 'SYS_ADMIN'],
      procHidden: true,
      noNewPrivileges: true,
      user: '0:0',
    });
    expect(r.events.map((e) => e.type)).toEqual(['JudgeLaunched', 'JudgeCompleted', 'RewardRecorded']);
    expect(r.image).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(fs.readFileSync(r.output.path, 'utf8')).toContain('scoring 1 file(s)');
  }, 120_000);

  it('writes NaN (with a planted reward.txt in the snapshot): verifier_error, never a zero', async () => {
    const r = await judge(fixture('nan-reward'), planted());
    expect(r).toMatchObject({
      status: 'verifier_error',
      rewards: null,
      primaryScore: null,
      detail: expect.stringContaining('NaN and Infinity are not JSON numbers'),
    });
    expect(r.events.map((e) => e.type)).toEqual(['JudgeLaunched', 'JudgeCompleted']);
  }, 60_000);

  it('writes malformed JSON next to a valid text reward: verifier_error, no fallback', async () => {
    const r = await judge(fixture('malformed-json'), workspace({ 'main.py': '' }));
    expect(r).toMatchObject({ status: 'verifier_error', detail: expect.stringContaining('reward.json: not valid JSON') });
  }, 60_000);

  it('writes a boolean: verifier_error', async () => {
    const r = await judge(fixture('boolean-reward'), workspace({ 'main.py': '' }));
    expect(r).toMatchObject({ status: 'verifier_error', detail: expect.stringContaining('"reward" is the boolean true, not a number') });
  }, 60_000);

  it('sleeps past the timeout: verifier_timeout, the container killed, its reward discarded', async () => {
    const t0 = Date.now();
    const r = await judge(fixture('sleep-timeout'), workspace({ 'main.py': '' }));
    expect(r).toMatchObject({ status: 'verifier_timeout', rewards: null, exitCode: null, detail: expect.stringContaining('verifier timeout of 10 s') });
    // killed, not waited for: the verifier would sleep 300 s (the 10 s timeout leaves a loaded machine time to start it)
    expect(Date.now() - t0).toBeLessThan(120_000);
    expect(fs.readFileSync(r.output.path, 'utf8')).toContain('sleeping past the timeout');
  }, 180_000);

  it('exhausts memory: the 64 MiB limit holds, verifier_error noting the OOM kill', async () => {
    const r = await judge(fixture('memory-hog'), workspace({ 'main.py': '' }));
    expect(r).toMatchObject({
      status: 'verifier_error',
      exitCode: 3,
      detail: expect.stringContaining('out-of-memory killer ended a process in the Judge (memory limit 64 MiB)'),
    });
    expect(r.limits?.memoryBytes).toBe(64 * MiB);
    expect(fs.readFileSync(r.output.path, 'utf8')).toMatch(/allocation exited with 137/);
  }, 60_000);

  it('forks without bound (as the candidate): the pids limit contains it, no candidate process survives', async () => {
    const r = await judge(fixture('fork-bomb'), workspace({ 'main.py': '' }));
    expect(r).toMatchObject({ status: 'completed', rewards: { reward: 1, leftover_candidate_processes: 0 } });
    expect(r.limits?.pidsLimit).toBe(64);
    const log = fs.readFileSync(r.output.path, 'utf8');
    expect(log).toContain('fork: retry: Resource temporarily unavailable'); // the limit was reached
    expect(log).toContain('timed out after 3 s; every candidate process was killed');
    expect(log).toContain('candidate exited with 124');
    expect(spawnSync('true').status).toBe(0); // the host still forks
  }, 60_000);

  it('tries to reach the network: only loopback exists, the container had network mode none', async () => {
    const r = await judge(fixture('network-probe'), workspace({ 'main.py': '' }));
    expect(r).toMatchObject({ status: 'completed', network: 'none', rewards: { reward: 1, interfaces: 1, routes: 0, unix_socket: 1 } });
    expect(fs.readFileSync(r.output.path, 'utf8')).toContain("interfaces: ['lo']");
  }, 60_000);

  it('tries to write into the snapshot mount: refused for root and the candidate; the snapshot is unchanged', async () => {
    const ws = workspace({ 'keep.txt': 'original\n' });
    const before = await rt.snapshots.snapshotDirectory(ws);
    const r = await judge(fixture('write-snapshot'), ws);
    expect(r).toMatchObject({ status: 'completed', rewards: { reward: 1, refused: 4 } });
    expect(r.snapshot).toBe(before);
    expect(fs.readFileSync(join(ws, 'keep.txt'), 'utf8')).toBe('original\n');
    await expect(rt.snapshotHome.verify(parseCid(before))).resolves.toMatchObject({ files: 1 });
  }, 60_000);

  it('prints far more output than the cap: 1 MiB kept, everything counted, the digest is the log file', async () => {
    const r = await judge(fixture('output-flood'), workspace({ 'main.py': '' }));
    expect(r.status).toBe('completed');
    expect(r.output.totalBytes).toBeGreaterThanOrEqual(20_000_000);
    expect(r.output).toMatchObject({ keptBytes: MiB, truncated: true });
    const log = fs.readFileSync(r.output.path);
    expect(log.length).toBe(MiB);
    expect(r.output.digest).toBe(`sha256:${createHash('sha256').update(log).digest('hex')}`);
  }, 60_000);

  it('a snapshot breaking the task rules (its own logs/verifier, a link to /tests): RuleViolation, score 0, nothing runs', async () => {
    const r = await judge(fixture('forbidden-path'), planted());
    expect(r).toMatchObject({ status: 'submission_error', primaryScore: 0, network: null, rule: { rule: 'snapshot.forbidden_path' } });
    expect(r.events.map((e) => e.type)).toEqual(['RuleViolation', 'JudgeCompleted']);
  }, 60_000);

  describe('examples/tasks/line-fit (candidate code run with run-as-candidate)', () => {
    const solution = () => {
      const text = fs.readFileSync(join(LINE_FIT, 'solution/solve.sh'), 'utf8');
      return /<<'PY'\n([\s\S]*?)\nPY\n/.exec(text)?.[1] as string;
    };

    it('scores the untouched workspace 0 and the reference solution 1', async () => {
      const initial = await judge(LINE_FIT, workspace({ 'fit.py': fs.readFileSync(join(LINE_FIT, 'environment/workspace/fit.py'), 'utf8') }));
      expect(initial).toMatchObject({ status: 'completed', primaryScore: 0 });
      const solved = await judge(LINE_FIT, workspace({ 'fit.py': solution() }));
      expect(solved).toMatchObject({ status: 'completed', primaryScore: 1, rewards: { reward: 1, passed: 4, total: 4 } });
    }, 120_000);

    it('judging the same snapshot twice gives the same digests and the same reward', async () => {
      const ws = workspace({ 'fit.py': solution() });
      const a = await judge(LINE_FIT, ws);
      const b = await judge(LINE_FIT, ws);
      expect(a.judge).not.toBe(b.judge);
      expect([b.snapshot, b.testsDigest, b.image]).toEqual([a.snapshot, a.testsDigest, a.image]);
      expect(b.rewards).toEqual(a.rewards);
      expect(b.primaryScore).toBe(1);
    }, 120_000);

    it('candidate code cannot write the verdict or read the hidden tests; planted reward files and links gain nothing', async () => {
      const r = await judge(LINE_FIT, planted({ 'fit.py': fs.readFileSync(join(REPO, 'tests/fixtures/judge/hostile/fit.py'), 'utf8') }));
      expect(r).toMatchObject({ status: 'completed', primaryScore: 0, rewards: { reward: 0, passed: 0, total: 4 } });
      const log = fs.readFileSync(r.output.path, 'utf8');
      expect(log).not.toContain('ATTACK SUCCEEDED');
      expect(log).not.toContain('HIDDEN-LINE-FIT-CASES');
      for (const what of [
        'write /logs/verifier/reward.json',
        'write /logs/verifier/reward.txt',
        'list /tests',
        'read /tests/cases.json',
        'read /tests through a planted link',
        'copy /tests out',
      ]) {
        expect(log).toContain(`attack refused: ${what}: PermissionError`);
      }
      // Root's processes do not even exist for candidate code: /proc is hidepid=invisible.
      for (const what of ["read the verifier's environment", "read the verifier's open files"]) {
        expect(log).toContain(`attack refused: ${what}: FileNotFoundError`);
      }
    }, 120_000);
  });

  it('leaves nothing behind, and the ledger verifies with every event signed by its role', async () => {
    expect(await rt.containers.listContainers({ 'org.assay.home': homeTag(home) })).toEqual([]);
    expect(await rt.containers.listVolumes({ 'org.assay.home': homeTag(home) })).toEqual([]);
    for (const r of results) expect(fs.existsSync(join(r.dir, 'owner.json'))).toBe(false);
    const report = await rt.ledgerHome.verify({ workers: 0, claims: runClaimRules() });
    expect(report.failure ?? null).toBeNull();
    expect(report.ok).toBe(true);
  }, 60_000);
});
