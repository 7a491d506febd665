/**
 * `assay rejudge` end to end (docs/rejudge.md), as a third party runs it: a real run of the reference agent on
 * examples/tasks/tiny-optimizer (one round: --max-submissions 1), its bundle exported with its snapshot, then fresh
 * ASSAY_HOMEs that hold nothing of the publisher's but the bundle and the root public key: the score reproduces
 * exactly and a signed RejudgeCompleted is recorded; a task that differs by one hidden-test byte, an untrusted key and
 * a damaged bundle are refused before anything is judged or recorded; a bundle without snapshots takes --car.
 */
import { createHash } from 'node:crypto';
import { cpSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { assay } from '../support/cli';
import { REPO_ROOT, TS_REGISTER } from '../support/child-process';
import { describeDocker } from '../support/docker';
import { homeEvents } from '../run/support/home-events';
import { systemClock } from '@assay/core';
import { ApiTokenStore } from '@assay/ledger';
import { createApi } from '../../apps/api/src/main';

jest.setTimeout(120_000);

const TASK = join(REPO_ROOT, 'examples/tasks/tiny-optimizer');

interface Report {
  verdict: string;
  recordedScore: number;
  scores: Array<{ judge: string; status: string; primaryScore: number | null }>;
  median: number;
  spread: number;
  delta: number;
  tolerance: number;
  toleranceFrom: string;
  snapshot: { cid: string; source: string };
  task: { digest: string };
  event: { stream: string; position: number; id: string };
}

describeDocker('assay rejudge (CLI, Docker)', () => {
  let tmp: string;
  let publisher: string;
  let bundle: string;
  let rootPub: string;
  let claim: { claimedScore: number; snapshot: string; taskDigest: string };

  /** A fresh home of a third party: its own keys and ledger, nothing of the publisher's. */
  const freshHome = async (name: string): Promise<string> => {
    const home = join(tmp, name);
    const r = await assay(['ledger', 'init', '--origin', `assay.test/${name}`], home);
    expect(r.code).toBe(0);
    return home;
  };

  beforeAll(async () => {
    tmp = mkdtempSync(join(tmpdir(), 'assay-rejudge-e2e-'));
    publisher = await freshHome('publisher');
    const run = await assay(['run', TASK, '--agent', 'reference', '--run-id', 'pub1', '--max-submissions', '1', '--json'], publisher, 110_000);
    expect(run.code).toBe(0);
    bundle = join(tmp, 'pub1.bundle');
    const exp = await assay(['bundle', 'export', 'pub1', '-o', bundle, '--snapshots', 'best', '--json'], publisher);
    expect(exp.code).toBe(0);
    claim = (JSON.parse(exp.stdout) as { claim: typeof claim }).claim;
    expect(claim.snapshot).toMatch(/^bafy/);
    const pub = readdirSync(join(publisher, 'keys')).find((f) => /^assay-controller-.*\.pub$/.test(f)) as string;
    rootPub = join(tmp, 'root.pub');
    cpSync(join(publisher, 'keys', pub), rootPub);
  }, 150_000);

  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it('reproduces the recorded score exactly in a fresh home, records a signed RejudgeCompleted, and the ledger verifies', async () => {
    const home = await freshHome('auditor');
    const r = await assay(['rejudge', bundle, '--task', TASK, '--repeat', '2', '--trusted-key', rootPub, '--json'], home, 90_000);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: expect.any(String) });
    const rep = JSON.parse(r.stdout) as Report;
    expect(rep).toMatchObject({
      verdict: 'reproduced',
      recordedScore: claim.claimedScore,
      median: claim.claimedScore,
      spread: 0,
      delta: 0,
      tolerance: 0,
      toleranceFrom: 'default',
      snapshot: { cid: claim.snapshot, source: 'bundle' },
      task: { digest: claim.taskDigest },
    });
    expect(rep.scores).toHaveLength(2);
    for (const s of rep.scores) expect(s).toMatchObject({ status: 'completed', primaryScore: claim.claimedScore });

    const events = await homeEvents(home);
    const rejudged = events.filter((e) => e.type === 'RejudgeCompleted');
    expect(rejudged).toHaveLength(1);
    expect(rejudged[0]).toMatchObject({
      stream: rep.event.stream,
      data: {
        snapshot: claim.snapshot,
        run: 'pub1',
        round: 1,
        status: 'completed',
        matches: true,
        verdict: 'reproduced',
        primaryScore: claim.claimedScore,
        recordedScore: claim.claimedScore,
        delta: 0,
        taskDigest: claim.taskDigest,
        scores: rep.scores,
      },
    });
    // the two Judges were recorded by this home's runtime, as `assay judge` records them
    expect(events.filter((e) => e.type === 'JudgeCompleted')).toHaveLength(2);
    const verified = await assay(['ledger', 'verify'], home);
    expect({ code: verified.code, stdout: verified.stdout }).toEqual({ code: 0, stdout: expect.stringContaining('ledger verified') });

    // the report's own bundle, checked by someone with nothing but that file and the auditor's root key
    const reportBundle = join(tmp, 'report.bundle');
    const exported = await assay(['bundle', 'export-rejudge', rep.event.id, '-o', reportBundle, '--json'], home);
    expect({ code: exported.code, stderr: exported.stderr }).toEqual({ code: 0, stderr: expect.any(String) });
    expect(JSON.parse(exported.stdout)).toMatchObject({ rejudge: rep.event.id, report: { verdict: 'reproduced', run: 'pub1' } });
    const auditorPub = join(tmp, 'auditor.pub');
    cpSync(join(home, 'keys', readdirSync(join(home, 'keys')).find((f) => /^assay-controller-.*\.pub$/.test(f)) as string), auditorPub);
    const nobody = join(tmp, 'nobody-home');
    const checked = await assay(['verify', reportBundle, '--trusted-key', auditorPub], nobody);
    expect({ code: checked.code, stdout: checked.stdout }).toEqual({
      code: 0,
      stdout: expect.stringContaining(`valid: re-judge report ${rep.event.id} of run pub1: reproduced, median ${claim.claimedScore}`),
    });
    expect(checked.stdout).toMatch(/^skipped snapshots/m);
    // it names the very result bundle that was re-judged, by the file's SHA-256
    const fileDigest = `sha256:${createHash('sha256').update(readFileSync(bundle)).digest('hex')}`;
    expect(checked.stdout).toContain(`re-judged bundle ${fileDigest}`);
    const wrongKey = await assay(['verify', reportBundle, '--trusted-key', rootPub], nobody);
    expect(wrongKey.code).toBe(6);
    // a report bundle is not something to re-judge
    const again = await assay(['rejudge', reportBundle, '--task', TASK, '--trusted-key', auditorPub], home);
    expect({ code: again.code, stderr: again.stderr }).toEqual({ code: 2, stderr: expect.stringContaining('BUNDLE_REJUDGE_NOT_RUN_BUNDLE') });
  });

  it('refuses a task that differs by one hidden-test byte, an untrusted root key and a damaged bundle; nothing is judged or recorded', async () => {
    const home = await freshHome('refusals');
    const before = (await homeEvents(home)).length;

    const changed = join(tmp, 'task-changed');
    cpSync(TASK, changed, { recursive: true });
    const score = join(changed, 'tests', 'score.py');
    const bytes = readFileSync(score);
    bytes[bytes.length - 1] = bytes[bytes.length - 1] === 0x0a ? 0x20 : 0x0a;
    writeFileSync(score, bytes);
    const mismatch = await assay(['rejudge', bundle, '--task', changed, '--repeat', '2', '--trusted-key', rootPub], home);
    expect(mismatch.code).toBe(5);
    expect(mismatch.stderr).toMatch(/BUNDLE_REJUDGE_TASK_MISMATCH: the task directory's digest is bafy\S+, the claim's task digest is bafy/);
    expect(mismatch.stderr).toContain(claim.taskDigest);

    const ownKey = readdirSync(join(home, 'keys')).find((f) => /^assay-controller-.*\.pub$/.test(f)) as string;
    const untrusted = await assay(['rejudge', bundle, '--task', TASK, '--trusted-key', join(home, 'keys', ownKey), '--json'], home);
    expect(untrusted.code).toBe(6);
    expect(JSON.parse(untrusted.stdout)).toMatchObject({ error: { code: 'BUNDLE_REJUDGE_CANNOT_CHECK', exitCode: 6 } });

    const damaged = join(tmp, 'damaged.bundle');
    const b = readFileSync(bundle);
    b[1024 + 100] = (b[1024 + 100] as number) ^ 1; // inside the checkpoint or the events, past the first header
    writeFileSync(damaged, b);
    const invalid = await assay(['rejudge', damaged, '--task', TASK, '--trusted-key', rootPub], home);
    expect(invalid.code).toBe(5);
    expect(invalid.stderr).toMatch(/BUNDLE_REJUDGE_INVALID: the bundle is invalid \(step /);

    const events = await homeEvents(home);
    expect(events.length).toBe(before);
    expect(events.filter((e) => e.type === 'RejudgeCompleted' || e.type === 'JudgeLaunched')).toEqual([]);
  });

  it('takes the snapshot from --car when the bundle carries none, and says how to get it when there is no CAR', async () => {
    const bare = join(tmp, 'bare.bundle');
    expect((await assay(['bundle', 'export', 'pub1', '-o', bare, '--snapshots', 'none'], publisher)).code).toBe(0);
    const car = join(tmp, 'snap.car');
    expect((await assay(['snapshot', 'export', claim.snapshot, '-o', car], publisher)).code).toBe(0);
    const home = await freshHome('car');

    const missing = await assay(['rejudge', bare, '--task', TASK, '--repeat', '1', '--trusted-key', rootPub], home);
    expect(missing.code).toBe(3);
    expect(missing.stderr).toMatch(/BUNDLE_REJUDGE_SNAPSHOT_MISSING: the bundle carries no snapshots .*--snapshots best.*--car FILE/);
    expect((await homeEvents(home)).filter((e) => e.type === 'RejudgeCompleted')).toEqual([]);

    const r = await assay(['rejudge', bare, '--task', TASK, '--repeat', '1', '--car', car, '--trusted-key', rootPub, '--json'], home, 60_000);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ verdict: 'reproduced', delta: 0, snapshot: { cid: claim.snapshot, source: 'car' } });
  });

  it('over HTTP: an auditor posts the bundle, the server re-judges it with its own copy of the task and records RejudgeCompleted', async () => {
    const home = await freshHome('http-auditor');
    const tasks = join(tmp, 'server-tasks');
    cpSync(TASK, join(tasks, 'tiny-optimizer'), { recursive: true });
    const store = new ApiTokenStore(home, { create: true });
    const auditorToken = store.create({ role: 'auditor', name: 'an auditor', clock: systemClock }).token;
    const operatorToken = store.create({ role: 'operator', name: 'an operator', clock: systemClock }).token;
    store.close();
    // The CLI the server starts runs from TypeScript here, as the tests' own CLI children do.
    const app = await createApi(home, { ASSAY_API_TASKS_DIR: tasks, ASSAY_API_RATE_LIMIT: '100000', ASSAY_API_RUN_NODE_OPTIONS: `-r ${TS_REGISTER}` });
    await app.listen(0, '127.0.0.1');
    const base = `http://127.0.0.1:${(app.getHttpServer().address() as { port: number }).port}`;
    try {
      const key = encodeURIComponent(readFileSync(rootPub, 'utf8').trim());
      const post = (token: string, query: string) =>
        fetch(`${base}/rejudges?${query}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/octet-stream' },
          body: readFileSync(bundle),
        });
      expect((await post(operatorToken, `task=tiny-optimizer&trustedKey=${key}`)).status).toBe(403); // auditors re-judge
      expect((await post(auditorToken, `task=../examples&trustedKey=${key}`)).status).toBe(404); // a name, never a path
      expect((await post(auditorToken, `task=tiny-optimizer&trustedKey=${key}&repeat=99`)).status).toBe(422);
      const res = await post(auditorToken, `task=tiny-optimizer&trustedKey=${key}&repeat=2`);
      expect(res.status).toBe(202);
      const { id } = (await res.json()) as { id: string };
      const get = async () =>
        (await (await fetch(`${base}/rejudges/${id}`, { headers: { authorization: `Bearer ${auditorToken}` } })).json()) as {
          status: string;
          exitCode: number | null;
          report: Report | null;
          error: unknown;
        };
      let st = await get();
      for (let i = 0; i < 300 && st.status === 'running'; i++) {
        await new Promise((r) => setTimeout(r, 300));
        st = await get();
      }
      expect(st).toMatchObject({ status: 'ended', exitCode: 0, error: null, report: { verdict: 'reproduced', delta: 0, snapshot: { cid: claim.snapshot } } });
      const events = await homeEvents(home);
      expect(events.filter((e) => e.type === 'RejudgeCompleted').map((e) => e.data)).toEqual([expect.objectContaining({ run: 'pub1', verdict: 'reproduced' })]);
      const unknown = await fetch(`${base}/rejudges/rj-20260101-00000000`, { headers: { authorization: `Bearer ${auditorToken}` } });
      expect(unknown.status).toBe(404);
    } finally {
      await app.close();
    }
  });
});
