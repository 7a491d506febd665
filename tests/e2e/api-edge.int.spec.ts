/**
 * The API's edge: request ids, bounded bodies (413), depth and forbidden keys (422), strict integer parameters,
 * DTO failures as 422 naming the field, /health reporting the ledger, 5xx logged, port and configuration errors as
 * one line, and the key registry caught up incrementally (a warm GET /ledger/keys reads no old events).
 */
import { spawnSync } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import type { INestApplication } from '@nestjs/common';
import { AssayError, systemClock } from '@assay/core';
import { LedgerHome, LedgerHomeProvider, createOperatorToken, initLedgerHome } from '@assay/ledger';
import { createApi, main, parsePort } from '../../apps/api/src/main';
import { MAX_PARAM_LENGTH, jsonProblem } from '../../apps/api/src/http-edge';
import { REPO_ROOT, TS_REGISTER } from '../support/child-process';
import { makeTmpDir } from '../support/ledger-fixtures';
import { deps } from '../support/ledger-home-fixtures';

type ErrorBody = { error: { code: string; kind: string; message: string; requestId?: string; details: Record<string, unknown> } };

describe('HTTP API edge', () => {
  let tmp: { dir: string; cleanup(): void };
  let home: string;
  let app: INestApplication;
  let base: string;
  let token: string;
  let initial: number;

  beforeAll(async () => {
    tmp = makeTmpDir('assay-api-edge-');
    home = join(tmp.dir, 'home');
    await initLedgerHome(home, { ...deps(), origin: 'assay.test/api-edge' });
    token = createOperatorToken(home, { clock: systemClock }).token;
    const h = new LedgerHome(home, deps());
    initial = await h.db.events.size();
    await h.close();
    app = await createApi(home);
    await app.listen(0, '127.0.0.1');
    base = `http://127.0.0.1:${(app.getHttpServer().address() as { port: number }).port}`;
  });
  afterAll(async () => {
    await app.close();
    tmp.cleanup();
  });

  const postRaw = (path: string, body: string, headers: Record<string, string> = {}) =>
    fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}`, ...headers }, body });
  const post = (path: string, body: unknown) => postRaw(path, JSON.stringify(body));

  it('puts a request id on every response, keeping a well-formed incoming one', async () => {
    const fresh = await fetch(`${base}/health`);
    expect(fresh.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    const kept = await fetch(`${base}/health`, { headers: { 'x-request-id': 'abc-123.X' } });
    expect(kept.headers.get('x-request-id')).toBe('abc-123.X');
    const odd = await fetch(`${base}/health`, { headers: { 'x-request-id': 'no spaces <allowed>' } });
    expect(odd.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    const err = await fetch(`${base}/ledger/proofs/inclusion/999`, { headers: { 'x-request-id': 'req-404' } });
    expect(err.status).toBe(404);
    expect(((await err.json()) as ErrorBody).error.requestId).toBe('req-404');
  });

  it('answers 413 in the error shape for a body over the limit', async () => {
    const res = await postRaw('/ledger/events', JSON.stringify({ stream: 'note-x', events: [{ type: 'Note', data: { text: 'x'.repeat(2 * 1024 * 1024) } }] }));
    expect(res.status).toBe(413);
    const body = (await res.json()) as ErrorBody;
    expect(body.error).toMatchObject({ code: 'API_BODY_TOO_LARGE', kind: 'invalid_input', details: { limitBytes: 1024 * 1024 } });
    expect(body.error.requestId).toBe(res.headers.get('x-request-id'));
  });

  it('answers 400 for malformed JSON and 422 for JSON nested too deep or with forbidden keys, naming the path', async () => {
    const malformed = await postRaw('/ledger/events', '{"stream": ');
    expect(malformed.status).toBe(400);
    expect(((await malformed.json()) as ErrorBody).error.code).toBe('API_MALFORMED_JSON');

    const deep = await postRaw(
      '/ledger/events',
      `{"stream":"note-x","events":[{"type":"Note","data":{"text":"x","n":${'['.repeat(2000)}${']'.repeat(2000)}}}]}`,
    );
    expect(deep.status).toBe(422);
    expect(((await deep.json()) as ErrorBody).error).toMatchObject({ code: 'API_JSON_TOO_DEEP', details: { maxDepth: 64 } });

    for (const key of ['__proto__', 'constructor', 'prototype']) {
      const res = await postRaw('/ledger/events', `{"stream":"note-x","events":[{"type":"Note","data":{"text":"x","inner":{"${key}":{"a":1}}}}]}`);
      expect(res.status).toBe(422);
      const e = ((await res.json()) as ErrorBody).error;
      expect(e).toMatchObject({ code: 'API_FORBIDDEN_KEY', details: { path: `$.events[0].data.inner.${key}` } });
      expect(e.message).toContain(key);
    }
    // Nothing was stored by any of them.
    const h = await (app.get(LedgerHomeProvider) as LedgerHomeProvider).reader();
    expect(await h.db.events.size()).toBe(initial);
  });

  it('answers a path the router cannot decode with 400 in the error shape, with the request id and security headers', async () => {
    const broken = await fetch(`${base}/runs/%E0%A4%A/report`, { headers: { 'x-request-id': 'req-bad-url' } });
    expect(broken.status).toBe(400);
    expect(broken.headers.get('x-request-id')).toBe('req-bad-url');
    expect(broken.headers.get('content-security-policy')).toContain("default-src 'self'");
    expect(((await broken.json()) as ErrorBody).error).toMatchObject({ code: 'API_BAD_URL', kind: 'invalid_input', requestId: 'req-bad-url' });
    // A segment over the router's limit: named, and the path in the message is cut short.
    const long = await fetch(`${base}/leaderboards/${'y'.repeat(MAX_PARAM_LENGTH + 1)}`);
    expect(long.status).toBe(400);
    const e = ((await long.json()) as ErrorBody).error;
    expect(e).toMatchObject({ code: 'API_BAD_URL' });
    expect(e.message).toContain(`over ${MAX_PARAM_LENGTH} characters`);
    expect(e.message.length).toBeLessThan(400);
    // Under the limit, the route's own check names what a task id is.
    const task = await fetch(`${base}/leaderboards/${'y'.repeat(4097)}`);
    expect(task.status).toBe(422);
    expect(((await task.json()) as ErrorBody).error.code).toBe('API_BAD_TASK');
    expect((await fetch(`${base}/health`)).status).toBe(200);
  });

  it('leaves a body of another type unread: the guard answers first, then the route says what it expected', async () => {
    const anonymous = await fetch(`${base}/ledger/events`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'x'.repeat(4 * 1024 * 1024) });
    expect(anonymous.status).toBe(401);
    const typed = await postRaw('/ledger/events', 'stream=note-x', { 'content-type': 'application/x-www-form-urlencoded' });
    expect(typed.status).toBe(422);
    expect(((await typed.json()) as ErrorBody).error.code).toBe('API_INVALID_BODY');
    const h = await (app.get(LedgerHomeProvider) as LedgerHomeProvider).reader();
    expect(await h.db.events.size()).toBe(initial);
  });

  it('sends /ui to the pages and answers a missing page with the API 404', async () => {
    const ui = await fetch(`${base}/ui`, { redirect: 'manual' });
    expect([ui.status, ui.headers.get('location')]).toEqual([302, '/ui/']);
    const index = await fetch(`${base}/ui/`);
    expect(index.status).toBe(200);
    expect(index.headers.get('content-type')).toContain('text/html');
    expect(await index.text()).toContain('<html');
    const missing = await fetch(`${base}/ui/no-such-page.js`);
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as ErrorBody).error.code).toBe('API_NO_SUCH_ROUTE');
    const vendor = await fetch(`${base}/ui/vendor/uPlot.iife.min.js`);
    expect([vendor.status, vendor.headers.get('content-type')]).toEqual([200, 'application/javascript; charset=utf-8']);
  });

  it('finds depth and key problems without recursion', () => {
    let v: unknown = 1;
    for (let i = 0; i < 100_000; i++) v = [v];
    expect(jsonProblem(v)).toMatchObject({ code: 'API_JSON_TOO_DEEP' });
    expect(jsonProblem({ a: [{ b: 1 }] })).toBeNull();
    expect(jsonProblem(JSON.parse('{"a":[{"__proto__":1}]}'))).toMatchObject({ path: '$.a[0].__proto__' });
  });

  it('answers DTO failures with 422 naming the field', async () => {
    const res = await post('/ledger/events', { stream: 'note-x', events: [{ type: 7, data: {} }] });
    expect(res.status).toBe(422);
    const e = ((await res.json()) as ErrorBody).error;
    expect(e).toMatchObject({ code: 'API_INVALID_BODY', kind: 'invalid_input' });
    expect(e.message).toContain('events[0].type');
    const extra = await post('/ledger/events', { stream: 'note-x', events: [{ type: 'Note', data: { text: 'x' } }], bogus: 1 });
    expect(extra.status).toBe(422);
    expect(((await extra.json()) as ErrorBody).error.message).toContain('bogus');
  });

  it.each(['1e3', '0x10', '-1', '1.0', '+1', ' 1', '99999999999999999', 'abc'])('refuses the position %j with 422 naming the parameter', async (p) => {
    const res = await fetch(`${base}/ledger/proofs/inclusion/${encodeURIComponent(p)}`);
    expect(res.status).toBe(422);
    const e = ((await res.json()) as ErrorBody).error;
    expect(e).toMatchObject({ code: 'API_BAD_INTEGER', details: { parameter: 'position' } });
  });

  it('parses query integers strictly too', async () => {
    const bad = await fetch(`${base}/ledger/proofs/consistency?old=1&new=0x2`);
    expect(bad.status).toBe(422);
    expect(((await bad.json()) as ErrorBody).error.details).toEqual({ parameter: 'new' });
    const missing = await fetch(`${base}/ledger/proofs/consistency`);
    expect(missing.status).toBe(422);
    expect(((await missing.json()) as ErrorBody).error.details).toEqual({ parameter: 'old' });
    const good = await fetch(`${base}/ledger/inclusion/1`);
    expect(good.status).toBe(404); // no such route: the strict parse is on the real one
  });

  it('reports the ledger on /health, and 503 with a reason when there is none', async () => {
    const ok = await fetch(`${base}/health`);
    expect(ok.status).toBe(200);
    expect(await ok.json()).toMatchObject({ status: 'ok', ledger: { events: initial } });

    const empty = join(tmp.dir, 'no-ledger');
    const bare = await createApi(empty);
    await bare.listen(0, '127.0.0.1');
    try {
      const res = await fetch(`http://127.0.0.1:${(bare.getHttpServer().address() as { port: number }).port}/health`);
      expect(res.status).toBe(503);
      const body = (await res.json()) as { status: string; reason: string };
      expect(body.status).toBe('unavailable');
      expect(body.reason.length).toBeGreaterThan(0);
    } finally {
      await bare.close();
    }
  });

  it('closes at once with a server-sent event stream open, ending the stream', async () => {
    const live = await createApi(home);
    await live.listen(0, '127.0.0.1');
    const res = await fetch(`http://127.0.0.1:${(live.getHttpServer().address() as { port: number }).port}/ledger/live`);
    expect([res.status, res.headers.get('content-type')]).toEqual([200, 'text/event-stream']);
    const reader = res.body!.getReader();
    const first = await reader.read();
    expect(Buffer.from(first.value ?? []).toString()).toContain('event: head');
    const started = Date.now();
    await live.close();
    expect(Date.now() - started).toBeLessThan(5000);
    // The stream ends (or breaks off) instead of staying open on a closed server.
    const rest = await reader.read().then(
      (r) => (r.done ? 'ended' : 'more'),
      () => 'broken',
    );
    expect(['ended', 'broken']).toContain(rest);
  });

  it('logs a 5xx as one JSON line with the request id', async () => {
    const lines: string[] = [];
    const spy = jest.spyOn(process.stderr, 'write').mockImplementation((s: string | Uint8Array) => {
      lines.push(String(s));
      return true;
    });
    const provider = app.get(LedgerHomeProvider) as LedgerHomeProvider;
    const reader = jest.spyOn(provider, 'reader').mockRejectedValueOnce(new Error('disk on fire'));
    try {
      const res = await fetch(`${base}/ledger/keys`, { headers: { 'x-request-id': 'req-500' } });
      expect(res.status).toBe(500);
      expect(((await res.json()) as ErrorBody).error).toMatchObject({ code: 'INTERNAL', requestId: 'req-500' });
    } finally {
      spy.mockRestore();
      reader.mockRestore();
    }
    const logged = lines.filter((l) => l.includes('req-500'));
    expect(logged).toHaveLength(1);
    const line = logged[0] ?? '';
    expect(line.trim().split('\n')).toHaveLength(1);
    expect(JSON.parse(line)).toMatchObject({ level: 'error', requestId: 'req-500', status: 500, path: '/ledger/keys' });
  });

  it('keeps the key registry between requests: a warm GET /ledger/keys reads only new events, and other requests run meanwhile', async () => {
    const writer = new LedgerHome(home, deps());
    try {
      await writer.ledger.appendGenericMany(
        Array.from({ length: 30 }, (_, s) => ({
          stream: `note-bulk-${s}`,
          events: Array.from({ length: 100 }, (_, i) => ({ type: 'Note', data: { text: `n ${s}.${i}` } })),
        })),
      );
    } finally {
      await writer.close();
    }
    const fresh = await createApi(home);
    await fresh.listen(0, '127.0.0.1');
    try {
      const url = `http://127.0.0.1:${(fresh.getHttpServer().address() as { port: number }).port}`;
      const h = await (fresh.get(LedgerHomeProvider) as LedgerHomeProvider).reader();
      const total = await h.db.events.size();
      expect(total).toBeGreaterThanOrEqual(3000);

      // Cold: the keys read and many health checks at once; the log is read exactly once, whatever the interleaving.
      const [keys, ...health] = await Promise.all([fetch(`${url}/ledger/keys`), ...Array.from({ length: 20 }, () => fetch(`${url}/health`))]);
      expect(keys.status).toBe(200);
      expect(health.every((r) => r.status === 200)).toBe(true);
      const listed = (await keys.json()) as Array<{ role: string }>;
      expect(listed.map((k) => k.role)).toContain('controller');
      expect(h.keyRegistryEventsRead).toBe(total);

      // Warm: concurrent reads of the keys read no old event.
      const again = await Promise.all(Array.from({ length: 10 }, () => fetch(`${url}/ledger/keys`)));
      expect(again.every((r) => r.status === 200)).toBe(true);
      expect(await again[0]?.json()).toEqual(listed);
      expect(h.keyRegistryEventsRead).toBe(total);

      // A new event: the next read catches up by exactly that one.
      const w = await postRaw('/ledger/events', JSON.stringify({ stream: 'note-after', events: [{ type: 'Note', data: { text: 'after' } }] }));
      expect(w.status).toBe(201);
      expect((await fetch(`${url}/ledger/keys`)).status).toBe(200);
      expect(h.keyRegistryEventsRead).toBe(total + 1);
    } finally {
      await fresh.close();
    }
  });
});

describe('API start-up errors', () => {
  const saved = { ...process.env };
  afterEach(() => {
    process.env = { ...saved };
  });

  it('parses ASSAY_API_PORT strictly', () => {
    expect(parsePort(undefined)).toBe(8080);
    expect(parsePort('9000')).toBe(9000);
    for (const bad of ['abc', '0', '65536', '80.0', '0x50', ' 80', '-1']) {
      let err: unknown;
      try {
        parsePort(bad);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(AssayError);
      expect(err).toMatchObject({
        code: 'API_BAD_PORT',
        kind: 'invalid_input',
        message: `ASSAY_API_PORT must be an integer 1-65535, got ${JSON.stringify(bad)}`,
      });
    }
  });

  it('refuses a port in use as unavailable, naming the port', async () => {
    const tmp = makeTmpDir('assay-api-port-');
    const busy: Server = createServer();
    await new Promise<void>((r) => busy.listen(0, '127.0.0.1', () => r()));
    const port = (busy.address() as { port: number }).port;
    try {
      process.env.ASSAY_HOME = join(tmp.dir, 'home');
      process.env.ASSAY_API_HOST = '127.0.0.1';
      process.env.ASSAY_API_PORT = String(port);
      await expect(main()).rejects.toMatchObject({ code: 'API_PORT_IN_USE', kind: 'unavailable', message: `port ${port} is in use` });
    } finally {
      await new Promise<void>((r) => busy.close(() => r()));
      tmp.cleanup();
    }
  });

  // The entry point itself, as `node dist/apps/api/src/main.js` runs it (here from its sources): one line, the
  // documented exit code, no stack trace.
  it('prints one line and exits 2 for a bad ASSAY_API_PORT (the entry point)', () => {
    const tmp = makeTmpDir('assay-api-port-');
    try {
      const r = spawnSync(process.execPath, ['-r', TS_REGISTER, join(REPO_ROOT, 'apps/api/src/main.ts')], {
        cwd: REPO_ROOT,
        env: { ...process.env, ASSAY_HOME: join(tmp.dir, 'home'), ASSAY_API_PORT: 'abc' },
        encoding: 'utf8',
        timeout: 30_000,
      });
      expect(r.status).toBe(2);
      expect(r.stderr).toBe('assay api: error API_BAD_PORT: ASSAY_API_PORT must be an integer 1-65535, got "abc"\n');
    } finally {
      tmp.cleanup();
    }
  });
});
