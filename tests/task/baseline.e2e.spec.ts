/**
 * `assay baseline` end to end, with Docker: a task made from the optimizer template (deterministic, minimize `loss`)
 * gets its start and oracle baselines recorded with N=3 (BaselineRecorded events signed into ASSAY_HOME's ledger,
 * which verifies), `baseline ls` lists them; then real runs of the same task (command agents, no run-setting flags:
 * the same task digest and protocol fingerprint) are compared with the matched start baseline by `run status`: one
 * that submits the oracle's optimizer (an improvement), one that submits the start unchanged (inside the baseline's
 * range: not distinguishable), and one under another submission budget (another fingerprint: no matched baseline).
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { assay } from '../support/cli';
import { describeDocker } from '../support/docker';
import { homeEvents } from '../run/support/home-events';

jest.setTimeout(180_000);

interface Score {
  judge: string;
  status: string;
  primaryScore: number | null;
}
interface Recorded {
  task: string;
  taskDigest: string;
  protocolFingerprint: string;
  fingerprintInput: Record<string, unknown>;
  metric: string | null;
  direction: string;
  kind: string;
  snapshot: string;
  judgeImageDigest: string | null;
  repeats: number;
  scores: Score[];
  median: number | null;
  min: number | null;
  max: number | null;
}

describeDocker('assay baseline (CLI, Docker)', () => {
  let base: string;
  let home: string;
  let task: string;
  let start: Recorded;
  let oracle: Recorded;

  beforeAll(async () => {
    base = mkdtempSync(join(tmpdir(), 'assay-baseline-e2e-'));
    home = join(base, 'home');
    task = join(base, 'opt');
    expect((await assay(['ledger', 'init', '--origin', 'assay.test/baseline-e2e'], home)).code).toBe(0);
    expect((await assay(['task', 'init', task, '--from-template', 'optimizer', '--name', 'local/baseline-opt'], home)).code).toBe(0);
  }, 60_000);

  afterAll(() => rmSync(base, { recursive: true, force: true }));

  it('records the start and the oracle judged 3 times each under the run protocol; the ledger verifies; ls lists them', async () => {
    const r = await assay(['baseline', task, '--repeat', '3', '--json'], home, 170_000);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const report = JSON.parse(r.stdout) as { stream: string; task: string; baselines: Array<{ kind: string; position: number }> };
    expect(report.stream).toBe('baseline-local:baseline-opt');
    expect(report.baselines.map((b) => b.kind)).toEqual(['start', 'oracle']);

    const events = await homeEvents(home, 'baseline-local:baseline-opt');
    expect(events.map((e) => e.type)).toEqual(['BaselineRecorded', 'BaselineRecorded']);
    [start, oracle] = events.map((e) => e.data as unknown as Recorded) as [Recorded, Recorded];
    for (const b of [start, oracle]) {
      expect(b).toMatchObject({ task: 'local:baseline-opt', metric: 'loss', direction: 'minimize', repeats: 3 });
      expect(b.scores).toHaveLength(3);
      expect(b.scores.every((s) => s.status === 'completed' && typeof s.primaryScore === 'number')).toBe(true);
      expect(b.judgeImageDigest).toMatch(/^sha256:[0-9a-f]{64}$/);
      expect(b.fingerprintInput).toMatchObject({ scheme: 'assay.protocol-fingerprint/1', taskDigest: b.taskDigest, judgeImageDigest: b.judgeImageDigest });
      const sorted = b.scores.map((s) => s.primaryScore as number).sort((x, y) => x - y);
      expect([b.min, b.median, b.max]).toEqual(sorted);
    }
    expect(oracle.taskDigest).toBe(start.taskDigest);
    expect(oracle.protocolFingerprint).toBe(start.protocolFingerprint);
    expect(oracle.snapshot).not.toBe(start.snapshot);
    expect(oracle.median as number).toBeLessThan(start.min as number); // the oracle is better (minimize)
    // every repeat is a real Judge of the ledger, on the snapshot recorded
    const all = await homeEvents(home);
    for (const s of [...start.scores, ...oracle.scores]) {
      const launched = all.find((e) => e.type === 'JudgeLaunched' && e.stream === `judge-${s.judge}`);
      expect(launched?.data.snapshot).toBe(start.scores.includes(s) ? start.snapshot : oracle.snapshot);
    }

    const verify = await assay(['ledger', 'verify'], home);
    expect([verify.code, verify.stderr]).toEqual([0, '']);

    const ls = await assay(['baseline', 'ls'], home);
    expect(ls.code).toBe(0);
    expect(ls.stdout).toMatch(new RegExp(`local:baseline-opt  start .*median ${start.median} \\[${start.min}, ${start.max}\\] over 3/3 completed Judges`));
    expect(ls.stdout).toMatch(/local:baseline-opt {2}oracle/);
    const lsTask = JSON.parse((await assay(['baseline', 'ls', '--task', task, '--json'], home)).stdout) as {
      baselines: Array<{ kind: string; current: boolean }>;
    };
    expect(lsTask.baselines.map((b) => [b.kind, b.current])).toEqual([
      ['start', true],
      ['oracle', true],
    ]);
    expect((await assay(['baseline', 'ls', '--task', join(base, 'missing')], home)).code).not.toBe(0);
    const bad = await assay(['baseline', task, '--repeat', '21'], home);
    expect([bad.code, bad.stderr]).toEqual([2, expect.stringMatching(/--repeat must be an integer from 1 to 20/)]);
  });

  interface StatusJson {
    taskDigest: string;
    fingerprint: string;
    best: { score: number } | null;
    baseline: {
      matched: boolean;
      verdict?: string;
      distinguishable?: boolean;
      absolute?: number;
      relative?: number;
      reason: string;
      baseline?: { repeats: number; spread: number };
    };
  }
  const status = async (run: string): Promise<{ text: string; json: StatusJson }> => {
    const text = await assay(['run', 'status', run], home);
    expect(text.code).toBe(0);
    const json = await assay(['run', 'status', run, '--json'], home);
    expect(json.code).toBe(0);
    return { text: text.stdout, json: JSON.parse(json.stdout) as StatusJson };
  };

  it("run status: a run that submits the oracle's optimizer is a distinguishable improvement over the matched start baseline", async () => {
    const solve = Buffer.from(readFileSync(join(task, 'solution', 'solve.sh'))).toString('base64');
    const r = await assay(['run', task, '--agent', `command:echo ${solve} | base64 -d | bash && rsi-submit`, '--run-id', 'better1'], home, 170_000);
    expect(r.code).toBe(0);
    const { text, json } = await status('better1');
    expect([json.taskDigest, json.fingerprint]).toEqual([start.taskDigest, start.protocolFingerprint]);
    expect(json.best?.score).toBe(oracle.median);
    expect(json.baseline).toMatchObject({ matched: true, verdict: 'improvement', distinguishable: true, baseline: { repeats: 3, spread: 0 } });
    expect(json.baseline.absolute).toBeCloseTo((start.median as number) - (oracle.median as number));
    expect(json.baseline.relative).toBeCloseTo(((start.median as number) - (oracle.median as number)) / Math.abs(start.median as number));
    expect(text).toMatch(
      new RegExp(`^baseline  start, median ${start.median}, range \\[${start.min}, ${start.max}\\] \\(spread 0\\) over 3/3 completed Judges`, 'm'),
    );
    expect(text).toMatch(/^vs start {2}\+[0-9.e-]+ absolute, \+[0-9.]+ % relative \(positive: better, minimize\): improvement \(/m);
  });

  it('run status: a run that submits the start unchanged lies inside the baseline range: not distinguishable', async () => {
    const r = await assay(['run', task, '--agent', 'command:rsi-submit', '--run-id', 'same1'], home, 170_000);
    expect(r.code).toBe(0);
    const { text, json } = await status('same1');
    expect(json.best?.score).toBe(start.median);
    expect(json.baseline).toMatchObject({ matched: true, verdict: 'not_distinguishable', distinguishable: false, absolute: 0 });
    expect(text).toMatch(/^vs start {2}0 absolute, .*: not_distinguishable \(the score lies within the baseline's range/m);
  });

  it('run status: a run under another protocol (its own submission budget) has no matched baseline', async () => {
    const r = await assay(['run', task, '--agent', 'command:rsi-submit', '--run-id', 'other1', '--max-submissions', '2'], home, 170_000);
    expect(r.code).toBe(0);
    const { text, json } = await status('other1');
    expect(json.taskDigest).toBe(start.taskDigest);
    expect(json.fingerprint).not.toBe(start.protocolFingerprint);
    expect(json.baseline).toEqual({ matched: false, reason: expect.stringMatching(/^no matched baseline: .*another protocol fingerprint/) });
    expect(text).toMatch(/^baseline  no matched baseline/m);
    const verify = await assay(['ledger', 'verify'], home);
    expect(verify.code).toBe(0);
  });

  it("a baseline taken with the run's own flags (--max-submissions 2) has its fingerprint, and matches it", async () => {
    const r = await assay(['baseline', task, '--repeat', '3', '--max-submissions', '2', '--json'], home, 170_000);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    const doc = JSON.parse(r.stdout) as { protocolFingerprint: string; fingerprintInput: { budgets: { maxSubmissions: number } } };
    const { json } = await status('other1');
    expect(doc.protocolFingerprint).toBe(json.fingerprint);
    expect(doc.fingerprintInput.budgets.maxSubmissions).toBe(2);
    expect(json.baseline).toMatchObject({ matched: true, verdict: 'not_distinguishable' });
    const bad = await assay(['baseline', task, '--max-submissions', 'lots'], home);
    expect({ code: bad.code, stderr: bad.stderr }).toEqual({ code: 2, stderr: expect.stringContaining('--max-submissions must be a non-negative integer') });
  });

  it('the leaderboard shows the baseline rows in the matched group and says the same as run status for every run', async () => {
    expect((await assay(['ledger', 'checkpoint'], home)).code).toBe(0);
    const r = await assay(['leaderboard', start.task, '--json'], home);
    expect(r.code).toBe(0);
    const doc = JSON.parse(r.stdout) as {
      groups: Array<{
        fingerprint: string;
        baselines: { start: { median: number } | null; oracle: unknown };
        rows: Array<{ run: string; vsBaseline: { verdict?: string; matched: boolean } }>;
      }>;
    };
    const matched = doc.groups.find((g) => g.fingerprint === start.protocolFingerprint)!;
    expect(matched.baselines.start).toMatchObject({ median: start.median });
    expect(matched.baselines.oracle).not.toBeNull();
    const verdicts = Object.fromEntries(doc.groups.flatMap((g) => g.rows.map((row) => [row.run, row.vsBaseline.matched ? row.vsBaseline.verdict : 'none'])));
    expect(verdicts).toEqual({ better1: 'improvement', same1: 'not_distinguishable', other1: 'not_distinguishable' });
    const text = await assay(['leaderboard', start.task], home);
    expect(text.stdout).toMatch(/^ {2}baseline start {2}median /m);
    expect(text.stdout).toMatch(/ improvement /);
    expect(text.stdout).toContain('+0 (+0.0%) not distinguishable');
  });

  it("a run's bundle carries its matched baseline and the baseline's Judges; assay verify recomputes the comparison", async () => {
    const file = join(base, 'better1.bundle');
    expect((await assay(['bundle', 'export', 'better1', '-o', file, '--snapshots', 'none', '--task', task], home)).code).toBe(0);
    const rootPub = readdirSync(join(home, 'keys')).find((f) => /^assay-controller-.*\.pub$/.test(f)) as string;
    const r = await assay(['verify', file, '--trusted-key', join(home, 'keys', rootPub), '--json'], join(base, 'nobody'));
    expect(r.code).toBe(0);
    const v = JSON.parse(r.stdout) as { claim: { baseline: Record<string, unknown> }; steps: Array<{ name: string; checked: number }> };
    expect(v.claim.baseline).toMatchObject({ matched: true, verdict: 'improvement', median: start.median, repeats: 3, completed: 3 });
    expect(v.steps.find((x) => x.name === 'task')?.checked).toBeGreaterThan(0);
    // the start baseline's three Judges travel with it (the claims step checks the scores against them)
    const manifest = JSON.parse(
      readFileSync(file)
        .subarray(512, 512 + 65536)
        .toString('utf8')
        .split('\0')[0]!,
    ) as { streams: string[] };
    for (const s of start.scores) expect(manifest.streams).toContain(`judge-${s.judge}`);
  });
});
