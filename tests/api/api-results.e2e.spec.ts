/**
 * The read side of the HTTP API on a real signed ledger (docs/operations.md, "HTTP API"): tasks, leaderboards with
 * baselines and re-judges, trajectories, reproducibility and budget reports, paged events with their stored bytes,
 * the latest checkpoint, live server-sent events, metrics, liveness and readiness, the OpenAPI document, security
 * headers, the web pages, rate limits and the token read policy.
 */
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import type { INestApplication } from '@nestjs/common';
import { systemClock } from '@assay/core';
import { ApiTokenStore } from '@assay/ledger';
import type { LeaderboardGroup, RunReport, TaskBudgetReport, Trajectory } from '@assay/projections';
import { createApi } from '../../apps/api/src/main';
import { makeTmpDir } from '../support/ledger-fixtures';
import { appendTo, homeWith, preamble, rejudgeDraft, sampleVariant } from '../projections/projection-fixtures';

jest.setTimeout(120_000);

type ErrorBody = { error: { code: string; kind: string; message: string; details: Record<string, unknown>; requestId?: string } };

let tmp: { dir: string; cleanup(): void };
let home: string;
let bestSnapshot: string;
const apps: INestApplication[] = [];

async function start(env: NodeJS.ProcessEnv = {}): Promise<string> {
  const app = await createApi(home, { ...env });
  await app.listen(0, '127.0.0.1');
  apps.push(app);
  return `http://127.0.0.1:${(app.getHttpServer().address() as { port: number }).port}`;
}

beforeAll(async () => {
  tmp = makeTmpDir('assay-api-results-');
  home = join(tmp.dir, 'home');
  const a = sampleVariant({ run: 'r-a' });
  bestSnapshot = (a.find((e) => e.type === 'RunCompleted')!.data as { bestSnapshot: string }).bestSnapshot;
  await homeWith(home, [
    ...preamble(),
    ...a,
    ...sampleVariant({ run: 'r-b', scores: [0.3, 0.2, 0.1] }),
    rejudgeDraft({ id: 'rj-1', run: 'r-a', round: 5, snapshot: bestSnapshot, recorded: 0.433, scores: [0.44, 0.43, 0.435] }),
  ]);
});
afterAll(async () => {
  for (const app of apps) await app.close();
  tmp.cleanup();
});

describe('HTTP API: results', () => {
  let base: string;
  beforeAll(async () => {
    base = await start();
  });
  const json = async <T>(path: string, status = 200): Promise<T> => {
    const res = await fetch(`${base}${path}`);
    expect({ path, status: res.status }).toEqual({ path, status });
    return (await res.json()) as T;
  };

  it('lists tasks and ranks a leaderboard, with the latest re-judge of each best snapshot', async () => {
    expect(await json('/tasks')).toEqual({ tasks: [{ task: 'tiny-optimizer', runs: 2, imported: 0 }] });
    const lb = await json<{ task: string; groups: LeaderboardGroup[] }>('/leaderboards/tiny-optimizer');
    expect(lb.groups).toHaveLength(1);
    const rows = lb.groups[0]!.rows;
    expect(rows.map((r) => [r.run, r.rank])).toEqual([
      ['r-b', 1],
      ['r-a', 2],
    ]);
    expect(rows[1]!.rejudge).toMatchObject({ id: expect.any(String), run: 'r-a', verdict: 'reproduced', median: 0.435, recordedScore: 0.433, tolerance: 0.01 });
    expect(rows[0]!.rejudge).toBeNull();
    expect((await json<{ groups: unknown[] }>('/leaderboards/no-such-task')).groups).toEqual([]);
  });

  it("serves a run's trajectory and its reproducibility and budget report", async () => {
    const t = await json<Trajectory>('/runs/r-a/trajectory');
    expect(t.rounds.map((r) => r.round)).toEqual([1, 2, 3, 4, 5]);
    expect(t.rounds.at(-1)).toMatchObject({ score: 0.433, bestSoFar: 0.433, bestRoundSoFar: 5 });
    const r = await json<RunReport>('/runs/r-a/report');
    expect(r.reproducibility.recorded).toEqual({ round: 5, score: 0.433, snapshot: bestSnapshot });
    expect(r.reproducibility.rejudges).toHaveLength(1);
    expect(r.reproducibility.latest).toMatchObject({ verdict: 'reproduced', judges: 3, delta: expect.closeTo(0.002, 9) });
    expect(r.budget.kinds.map((k) => k.kind)).toEqual(['submissions', 'wall_time', 'agent_time', 'gpu_seconds']);
    const subs = r.budget.kinds[0]!;
    expect(subs.used).toBeGreaterThan(0);
    expect(subs.remaining).toBe(subs.allowed === null ? null : Math.max(0, subs.allowed - subs.used));
    const b = await json<{ reproducibility: { rejudges: unknown[]; latest: unknown } }>('/runs/r-b/report');
    expect(b.reproducibility).toMatchObject({ rejudges: [], latest: null });
    const task = await json<TaskBudgetReport>('/tasks/tiny-optimizer/budget');
    expect(task.runs).toBe(2);
    expect(task.kinds[0]!.used).toBe(2 * subs.used);
  });

  it('answers a missing run 404 and a malformed id 422, in the error shape', async () => {
    expect((await json<ErrorBody>('/runs/nope/report', 404)).error.code).toBe('RUN_NOT_FOUND');
    expect((await json<ErrorBody>('/runs/nope/trajectory', 404)).error.code).toBe('RUN_NOT_FOUND');
    expect((await json<ErrorBody>(`/runs/${encodeURIComponent('<script>')}/report`, 422)).error.code).toBe('API_BAD_RUN_ID');
    expect((await json<ErrorBody>(`/leaderboards/${encodeURIComponent('a\u0007b')}`, 422)).error.code).toBe('API_BAD_TASK');
  });

  it('pages events with their stored envelope bytes, whose SHA-256 is the hash', async () => {
    const page = await json<{ events: Array<{ position: number; hash: string; envelope: string; type: string; stream: string }>; next: number | null }>(
      '/ledger/events?from=1&limit=2',
    );
    expect(page.events.map((e) => e.position)).toEqual([1, 2]);
    // a full page never changes: kept, and answered again byte for byte
    const twice = await fetch(`${base}/ledger/events?from=1&limit=2`);
    expect(twice.headers.get('etag')).toMatch(/^"/);
    expect(JSON.parse(await twice.text())).toEqual(page);
    expect(page.next).toBe(3);
    for (const e of page.events) expect(createHash('sha256').update(Buffer.from(e.envelope, 'base64')).digest('hex')).toBe(e.hash);
    const stream = await json<{ events: Array<{ stream: string; revision: number }>; next: number | null }>('/ledger/events?stream=run-r-a&from=0&limit=1000');
    expect(stream.events.every((e) => e.stream === 'run-r-a')).toBe(true);
    expect(stream.next).toBeNull();
    expect((await json<ErrorBody>('/ledger/events?limit=1001', 422)).error).toMatchObject({ code: 'API_BAD_INTEGER', details: { parameter: 'limit' } });
    expect((await json<ErrorBody>('/ledger/events?limit=0', 422)).error.code).toBe('API_BAD_INTEGER');
    expect((await json<ErrorBody>(`/ledger/events?stream=${encodeURIComponent('../x')}`, 422)).error.code).toBe('API_BAD_STREAM');
  });

  it('serves the latest checkpoint, and the head and a run as server-sent events', async () => {
    const cp = await json<{ treeSize: number; rootHash: string; note: string }>('/ledger/checkpoints/latest');
    expect(cp.note).toContain(`\n${cp.treeSize}\n${cp.rootHash}\n`);
    const res = await fetch(`${base}/runs/r-a/live`);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    // The run is complete: one trajectory, then the stream ends.
    const text = await res.text();
    const events = text.split('\n\n').filter((b) => b.trim().length > 0);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatch(/^event: trajectory\n/m);
    const data = JSON.parse(/^data: (.*)$/m.exec(events[0]!)![1]!) as Trajectory;
    expect(data).toMatchObject({ run: 'r-a', status: 'completed' });
    const ac = new AbortController();
    const head = await fetch(`${base}/ledger/live`, { signal: ac.signal });
    const reader = head.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    ac.abort();
    expect(first).toMatch(/event: head\n(id: \d+\n)?data: \{"events":\d+,"checkpoint":\{"treeSize":\d+/);
  });

  it('serves metrics, liveness and readiness', async () => {
    const m = await (await fetch(`${base}/metrics`)).text();
    expect(m).toMatch(/^assay_ledger_events \d+$/m);
    expect(m).toMatch(/^assay_projection_lag_events 0$/m);
    expect(m).toMatch(/^assay_rounds\{outcome="scored"\} 6$/m);
    expect(m).toMatch(/^assay_judges\{status="completed"\} 6$/m);
    expect(m).toMatch(/^assay_judge_seconds_sum\{status="completed"\} \d+(\.\d+)?$/m);
    expect(m).toMatch(/^assay_runs\{status="completed"\} 2$/m);
    expect(m).toMatch(/^assay_http_requests_total\{method="GET",route="\/tasks",status="200"\} \d+$/m);
    expect(await json('/health/live')).toMatchObject({ status: 'ok' });
    expect(await json('/health/ready')).toMatchObject({ status: 'ok', info: { ledger: { status: 'up' }, readModels: { status: 'up' } } });
  });

  it('serves the OpenAPI document, security headers and the web pages', async () => {
    const doc = await json<{ paths: Record<string, unknown> }>('/api/docs/openapi.json');
    for (const p of ['/leaderboards/{task}', '/runs/{id}/report', '/runs/{id}/trajectory', '/ledger/events', '/tokens', '/metrics'])
      expect(Object.keys(doc.paths)).toContain(p);
    const docs = await fetch(`${base}/api/docs`);
    expect(docs.status).toBe(200);
    const res = await fetch(`${base}/ui/index.html`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-security-policy')).toMatch(/script-src 'self'/);
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(res.headers.get('x-frame-options')).toBe('SAMEORIGIN');
    expect(await res.text()).not.toMatch(/<script>(?!<\/script>)|<script(?![^>]*\bsrc=)[^>]*>/); // no inline script
    expect((await fetch(`${base}/ui/vendor/uPlot.iife.min.js`)).status).toBe(200);
    const root = await fetch(`${base}/`, { redirect: 'manual' });
    expect(root.status).toBe(302);
    expect(root.headers.get('location')).toBe('/ui/index.html');
  });

  it('never reports past the latest signed checkpoint: a new run shows once a checkpoint covers it', async () => {
    // kept answers: the same bytes and ETag until a signed checkpoint moves the read models
    const first = await fetch(`${base}/leaderboards/tiny-optimizer`);
    const etag = first.headers.get('etag')!;
    expect(etag).toMatch(/^"[A-Za-z0-9_-]{27}"$/);
    const body = await first.text();
    const again = await fetch(`${base}/leaderboards/tiny-optimizer`);
    expect([again.headers.get('etag'), await again.text()]).toEqual([etag, body]);
    const notModified = await fetch(`${base}/leaderboards/tiny-optimizer`, { headers: { 'if-none-match': etag } });
    expect([notModified.status, await notModified.text()]).toEqual([304, '']);
    const runsCompleted = async () => /^assay_runs\{status="completed"\} (\d+)$/m.exec(await (await fetch(`${base}/metrics`)).text())?.[1];
    expect(await runsCompleted()).toBe('2');
    await appendTo(home, sampleVariant({ run: 'r-c', scores: [0.5, 0.5, 0.5] }), { checkpoint: false });
    expect((await fetch(`${base}/leaderboards/tiny-optimizer`)).headers.get('etag')).toBe(etag); // nothing signed yet
    expect(await runsCompleted()).toBe('2');
    expect((await json<ErrorBody>('/runs/r-c/trajectory', 404)).error.code).toBe('RUN_NOT_FOUND');
    await appendTo(home, [], { checkpoint: true });
    expect((await json<Trajectory>('/runs/r-c/trajectory')).run).toBe('r-c');
    expect(await runsCompleted()).toBe('3'); // the metrics' read-model figures are counted again once they move
    const moved = await fetch(`${base}/leaderboards/tiny-optimizer`, { headers: { 'if-none-match': etag } });
    expect(moved.status).toBe(200);
    expect(moved.headers.get('etag')).not.toBe(etag);
    expect(((await moved.json()) as { groups: LeaderboardGroup[] }).groups[0]!.rows.map((r) => r.run)).toContain('r-c');
  });
});

describe('HTTP API: limits and read policy', () => {
  it('rate-limits per address and route with 429 API_RATE_LIMITED and Retry-After', async () => {
    const base = await start({ ASSAY_API_RATE_LIMIT: '3' });
    for (let i = 0; i < 3; i++) expect((await fetch(`${base}/ledger/keys`)).status).toBe(200);
    expect((await fetch(`${base}/health/live`)).status).toBe(200);
    const res = await fetch(`${base}/ledger/keys`);
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBe('60');
    expect(((await res.json()) as ErrorBody).error).toMatchObject({ code: 'API_RATE_LIMITED', kind: 'refused' });
  });

  it('with ASSAY_API_READS=token, reads need a token of any role; liveness stays open', async () => {
    const base = await start({ ASSAY_API_READS: 'token' });
    const store = new ApiTokenStore(home, { create: true });
    const reader = store.create({ role: 'reader', name: 'results test', clock: systemClock });
    store.close();
    const anon = await fetch(`${base}/tasks`);
    expect(anon.status).toBe(401);
    expect(((await anon.json()) as ErrorBody).error.code).toBe('API_UNAUTHENTICATED');
    expect((await fetch(`${base}/tasks`, { headers: { authorization: `Bearer ${reader.token}` } })).status).toBe(200);
    expect((await fetch(`${base}/health/live`)).status).toBe(200);
  });

  it('refuses a bad ASSAY_API_READS or ASSAY_API_RATE_LIMIT at start', async () => {
    await expect(createApi(home, { ASSAY_API_READS: 'yes' })).rejects.toMatchObject({ code: 'API_BAD_READ_POLICY' });
    await expect(createApi(home, { ASSAY_API_RATE_LIMIT: '1e3' })).rejects.toMatchObject({ code: 'API_BAD_RATE_LIMIT' });
  });
});

describe('HTTP API: Judge logs', () => {
  it("serves a round's kept Judge log redacted, as text; 404 for a round or log that is not there", async () => {
    const { mkdirSync, writeFileSync } = await import('node:fs');
    const logs = join(home, 'runs', 'r-a', 'logs');
    mkdirSync(logs, { recursive: true });
    writeFileSync(join(logs, 'round-1.log'), 'score 0.9\nOPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwxyz0123456789\n<script>alert(1)</script>\n\u00e9t\u00e9\n');
    const base = await start();
    const res = await fetch(`${base}/runs/r-a/rounds/1/log`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    const text = await res.text();
    expect(text).toContain('score 0.9\n');
    expect(text).not.toContain('sk-abcdefghijklmnopqrstuvwxyz');
    expect(text).toContain('<script>alert(1)</script>'); // text/plain with nosniff: shown, never run
    expect(text).toContain('\u00e9t\u00e9'); // the bytes as they were
    const missing = await fetch(`${base}/runs/r-a/rounds/2/log`);
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as ErrorBody).error.code).toBe('LOG_NOT_FOUND');
    expect(((await (await fetch(`${base}/runs/r-a/rounds/99/log`)).json()) as ErrorBody).error.code).toBe('ROUND_NOT_FOUND');
    expect((await fetch(`${base}/runs/r-a/rounds/0/log`)).status).toBe(422);
  });
});

describe('HTTP API: hostile input', () => {
  it('answers 50 MB bodies, wrong types, unknown fields and path tricks with 4xx and a clear message, and stays healthy', async () => {
    const base = await start({ ASSAY_API_RATE_LIMIT: '100000' });
    const store = new ApiTokenStore(home, { create: true });
    const admin = store.create({ role: 'admin', name: 'hostile input', clock: systemClock }).token;
    store.close();
    const headers = { 'content-type': 'application/json', authorization: `Bearer ${admin}` };
    const big = await fetch(`${base}/ledger/events`, { method: 'POST', headers, body: JSON.stringify({ stream: 'x', pad: 'a'.repeat(50 * 1024 * 1024) }) });
    expect(big.status).toBe(413);
    expect(((await big.json()) as ErrorBody).error.code).toBe('API_BODY_TOO_LARGE');
    const cases: Array<[string, RequestInit, number, string]> = [
      ['/ledger/events', { method: 'POST', headers, body: JSON.stringify({ stream: 7, events: 'no' }) }, 422, 'API_INVALID_BODY'],
      [
        '/ledger/events',
        { method: 'POST', headers, body: JSON.stringify({ stream: 'note-x', events: [{ type: 'Note', data: {} }], admin: true }) },
        422,
        'API_INVALID_BODY',
      ],
      ['/tokens', { method: 'POST', headers, body: JSON.stringify({ role: 'root', name: 'x' }) }, 422, 'API_INVALID_BODY'],
      ['/tokens', { method: 'POST', headers, body: '{"role":' }, 400, 'API_MALFORMED_JSON'],
      [`/runs/${encodeURIComponent('../../etc')}/report`, {}, 422, 'API_BAD_RUN_ID'],
      // the client resolves the dot segments itself: what arrives is a path no route serves
      ['/runs/%2e%2e/trajectory', {}, 404, 'API_NO_SUCH_ROUTE'],
      [`/runs/r-a/rounds/${encodeURIComponent('1/../../x')}/log`, {}, 422, 'API_BAD_INTEGER'],
      [`/ledger/events?stream=${encodeURIComponent('run-r-a/../x')}`, {}, 422, 'API_BAD_STREAM'],
      ['/ledger/events?from=-1', {}, 422, 'API_BAD_INTEGER'],
      ['/ledger/events?limit=1e3', {}, 422, 'API_BAD_INTEGER'],
      ['/ledger/proofs/inclusion/0x10', {}, 422, 'API_BAD_INTEGER'],
      ['/tokens/..%2Fapi%2Ftokens.db', { method: 'DELETE', headers }, 404, 'API_TOKEN_NOT_FOUND'],
    ];
    for (const [path, init, status, code] of cases) {
      const res = await fetch(`${base}${path}`, init);
      const body = (await res.json()) as ErrorBody;
      expect({ path, status: res.status, code: body.error.code }).toEqual({ path, status, code });
      expect(body.error.message.length).toBeGreaterThan(10);
      expect(JSON.stringify(body)).not.toMatch(/\n\s+at |\.ts:\d+/);
    }
    expect((await fetch(`${base}/health/ready`)).status).toBe(200);
    expect((await fetch(`${base}/runs/r-a/report`)).status).toBe(200);
  });
});

describe('HTTP API: bundles between two servers', () => {
  it('exports a run as a signed bundle from one API and imports it into another, where it ranks as an imported row', async () => {
    const { readdirSync, readFileSync } = await import('node:fs');
    const { verifyBundle } = await import('@assay/bundles');
    const { runClaimRules } = await import('@assay/run');
    const store = new ApiTokenStore(home, { create: true });
    const publisherOp = store.create({ role: 'operator', name: 'publisher', clock: systemClock }).token;
    store.close();
    const base = await start({ ASSAY_API_RATE_LIMIT: '100000' });
    const res = await fetch(`${base}/runs/r-b/bundle`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${publisherOp}` },
      body: JSON.stringify({ snapshots: 'none' }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/octet-stream');
    expect(res.headers.get('content-disposition')).toBe('attachment; filename="r-b.bundle"');
    const bytes = Buffer.from(await res.arrayBuffer());
    // the publisher's root key, as ledger.json pins it
    const pub = (JSON.parse(readFileSync(join(home, 'ledger', 'ledger.json'), 'utf8')) as { rootKey: string }).rootKey;
    const v = await verifyBundle(
      (async function* () {
        yield bytes;
      })(),
      { trustedKeys: [pub], claims: runClaimRules() },
    );
    expect(v).toMatchObject({ verdict: 'valid', kind: 'run', run: 'r-b' });
    expect(readdirSync(join(home, 'api', 'exports'))).toEqual([]);

    // a second server with a ledger of its own imports it
    const other = join(tmp.dir, 'other');
    await homeWith(other, [...preamble(), ...sampleVariant({ run: 'r-mine', scores: [0.9, 0.8, 0.7] })]);
    const s2 = new ApiTokenStore(other, { create: true });
    const op2 = s2.create({ role: 'operator', name: 'importer', clock: systemClock }).token;
    s2.close();
    const app2 = await createApi(other, {});
    await app2.listen(0, '127.0.0.1');
    apps.push(app2);
    const base2 = `http://127.0.0.1:${(app2.getHttpServer().address() as { port: number }).port}`;
    const imported = await fetch(`${base2}/bundles?publisherKey=${encodeURIComponent(pub)}`, {
      method: 'POST',
      headers: { 'content-type': 'application/octet-stream', authorization: `Bearer ${op2}` },
      body: bytes,
    });
    expect(imported.status).toBe(201);
    const lb = (await (await fetch(`${base2}/leaderboards/tiny-optimizer`)).json()) as { groups: LeaderboardGroup[] };
    expect(lb.groups[0]!.rows.map((r) => [r.run, r.source, r.rank])).toEqual([
      ['r-b', 'imported', 1],
      ['r-mine', 'ledger', 2],
    ]);
  });
});

describe('HTTP API: keys (admin)', () => {
  it('registers and revokes a key; refuses a bad key text (422), a second registration (409); shows cosignatures when kept', async () => {
    const { generateKeyPair } = await import('@assay/ledger');
    const store = new ApiTokenStore(home, { create: true });
    const admin = store.create({ role: 'admin', name: 'key admin', clock: systemClock }).token;
    store.close();
    const base = await start({ ASSAY_API_RATE_LIMIT: '100000' });
    const post = (path: string, body: unknown) =>
      fetch(`${base}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${admin}` },
        body: JSON.stringify(body),
      });
    const kp = generateKeyPair('auditor', 'api-auditor');
    const reg = await post('/ledger/keys', { publicKey: kp.publicKeyText, role: 'auditor' });
    expect(reg.status).toBe(201);
    const signer = ((await reg.json()) as { signer: string }).signer;
    expect(signer).toMatch(/^api-auditor\+[0-9a-f]{8}$/);
    const keys = (await (await fetch(`${base}/ledger/keys`)).json()) as Array<{ keyId: string; role: string; revokedAt: string | null }>;
    expect(keys.find((k) => k.keyId === signer)).toMatchObject({ role: 'auditor', revokedAt: null });
    expect((await post('/ledger/keys', { publicKey: kp.publicKeyText, role: 'auditor' })).status).toBe(409);
    const bad = await post('/ledger/keys', { publicKey: 'api-auditor+00+nonsense', role: 'auditor' });
    expect(bad.status).toBe(422);
    expect(((await bad.json()) as ErrorBody).error.code).toBe('API_INVALID_BODY');
    expect((await post('/ledger/keys', { publicKey: kp.publicKeyText, role: 'root' })).status).toBe(422);
    const rev = await post(`/ledger/keys/${encodeURIComponent(signer)}/revoke`, { reason: 'rotated' });
    expect(rev.status).toBe(201);
    expect(await rev.json()).toMatchObject({ signer, revoked: true });
    expect((await post('/ledger/keys/not-a-signer/revoke', { reason: 'x' })).status).toBe(422);
    const cp = (await (await fetch(`${base}/ledger/checkpoints/latest`)).json()) as { cosigned: string | null };
    expect(cp).toMatchObject({ cosigned: null });
  });
});
