/**
 * Runs through the HTTP API, for real (Docker): an operator starts `assay run` for a task of the server's task
 * directory, watches its trajectory grow while it runs (live checkpoints), and cancels it; the run ends `cancelled`
 * in the ledger and its Work container is gone. Refusals: no task directory configured, an unknown task, a run id in
 * use, a cancel of a run that is not running.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { INestApplication } from '@nestjs/common';
import { systemClock } from '@assay/core';
import { ApiTokenStore } from '@assay/ledger';
import type { Trajectory } from '@assay/projections';
import { createApi } from '../../apps/api/src/main';
import { assay } from '../support/cli';
import { REPO_ROOT, TS_REGISTER } from '../support/child-process';
import { describeDocker } from '../support/docker';
import { homeEvents } from '../run/support/home-events';

jest.setTimeout(240_000);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Waits for `fn`; on a timeout the error carries the run's output (`log`), which says why. */
async function until<T>(what: string, fn: () => Promise<T | null | undefined | false>, ms: number, log?: string): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) {
      const tail = log && existsSync(log) ? readFileSync(log, 'utf8').slice(-4000) : '(no output)';
      throw new Error(`timed out waiting for ${what}; the run's output:\n${tail}`);
    }
    await sleep(500);
  }
}

describeDocker('HTTP API: runs (Docker)', () => {
  let home: string;
  let app: INestApplication;
  let base: string;
  let operator: string;
  let reader: string;

  beforeAll(async () => {
    home = join(mkdtempSync(join(tmpdir(), 'assay-api-runs-')), 'home');
    expect((await assay(['ledger', 'init', '--origin', 'assay.test/api-runs'], home)).code).toBe(0);
    const store = new ApiTokenStore(home, { create: true });
    operator = store.create({ role: 'operator', name: 'runs test', clock: systemClock }).token;
    reader = store.create({ role: 'reader', name: 'runs reader', clock: systemClock }).token;
    store.close();
    // The API runs inside jest here, from TypeScript: the run's process loads the CLI's sources the same way.
    app = await createApi(home, { ASSAY_API_TASKS_DIR: join(REPO_ROOT, 'examples', 'tasks'), ASSAY_API_RUN_NODE_OPTIONS: `-r ${TS_REGISTER}` });
    await app.listen(0, '127.0.0.1');
    base = `http://127.0.0.1:${(app.getHttpServer().address() as { port: number }).port}`;
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    rmSync(join(home, '..'), { recursive: true, force: true });
  });

  const post = (path: string, body: unknown, token = operator) =>
    fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify(body) });

  it('starts a run, shows its trajectory while it runs, and cancels it', async () => {
    expect((await post('/runs', { task: 'tiny-optimizer', agent: 'command:rsi-submit; sleep 200', runId: 'api1' }, reader)).status).toBe(403);
    const res = await post('/runs', { task: 'tiny-optimizer', agent: 'command:rsi-submit; sleep 200', runId: 'api1' });
    expect(res.status).toBe(202);
    const started = (await res.json()) as { run: string; pid: number; log: string };
    expect(started).toMatchObject({ run: 'api1', log: join(home, 'api', 'runs', 'api1.log') });

    // the first round shows once a live checkpoint covers it (every 10 s while the run goes on)
    const t = await until(
      'round 1 in the trajectory',
      async () => {
        const r = await fetch(`${base}/runs/api1/trajectory`);
        if (r.status !== 200) return null;
        const j = (await r.json()) as Trajectory;
        return j.rounds.some((x) => x.round === 1 && x.status !== 'judging') ? j : null;
      },
      150_000,
      started.log,
    );
    expect(t.status).toBe('running');

    const again = await post('/runs', { task: 'tiny-optimizer', agent: 'reference', runId: 'api1' });
    expect(again.status).toBe(409);
    expect(((await again.json()) as { error: { code: string } }).error.code).toBe('RUN_EXISTS');

    const cancel = await post('/runs/api1/cancel', {});
    expect(cancel.status).toBe(202);
    await until('the controller to end', async () => !existsSync(join(home, 'runs', 'api1', 'controller.lock')), 90_000, started.log);
    const events = await homeEvents(home, 'run-api1');
    expect(events[events.length - 1]).toMatchObject({ type: 'RunCompleted', data: { status: 'cancelled' } });
    expect(readFileSync(started.log, 'utf8')).toContain('cancel requested (POST /runs/:id/cancel)');
    const after = (await (await fetch(`${base}/runs/api1/trajectory`)).json()) as Trajectory;
    expect(after.status).toBe('cancelled');
    const late = await post('/runs/api1/cancel', {});
    expect(late.status).toBe(409);
    expect(((await late.json()) as { error: { code: string } }).error.code).toBe('RUN_NOT_RUNNING');
  });

  it('refuses an unknown task (404), a path for a task (422), and any run without a task directory (403)', async () => {
    const unknown = await post('/runs', { task: 'no-such-task', agent: 'reference' });
    expect(unknown.status).toBe(404);
    const path = await post('/runs', { task: '../tiny-optimizer', agent: 'reference' });
    expect(path.status).toBe(422);
    expect(((await path.json()) as { error: { code: string } }).error.code).toBe('API_INVALID_BODY');
    const bare = await createApi(home, {});
    await bare.listen(0, '127.0.0.1');
    try {
      const url = `http://127.0.0.1:${(bare.getHttpServer().address() as { port: number }).port}/runs`;
      const r = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${operator}` },
        body: JSON.stringify({ task: 'tiny-optimizer', agent: 'reference' }),
      });
      expect(r.status).toBe(403);
      expect(((await r.json()) as { error: { code: string } }).error.code).toBe('API_RUNS_DISABLED');
    } finally {
      await bare.close();
    }
    expect(existsSync(join(home, 'runs', 'no-such-task'))).toBe(false);
  });
});
