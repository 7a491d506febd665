/**
 * The submission endpoint on a real Unix socket, driven by the real rsi-submit script (python3, standard library
 * only) for every response it can get, and by raw HTTP for what rsi-submit never sends.
 */
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import * as net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SubmissionService, SubmitEndpoint, generateRunToken, type FakeJudgeBehaviour } from '@assay/run';
import { startInput, TOKEN, wiring, type Wiring } from './support/run-fixtures';
import { raw, rsiSubmit } from './support/endpoint';

interface Served {
  w: Wiring;
  svc: SubmissionService;
  endpoint: SubmitEndpoint;
  socket: string;
  env: Record<string, string>;
}

let dir: string;
const open: SubmitEndpoint[] = [];
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'assay-submit-'));
});
afterEach(async () => {
  for (const e of open.splice(0)) await e.close();
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let count = 0;
async function serve(
  o: { run?: string; script?: FakeJudgeBehaviour[]; start?: Parameters<typeof startInput>[1]; files?: Record<string, string> } = {},
): Promise<Served> {
  count += 1;
  const run = o.run ?? `r${count}`;
  const w = wiring({ run, ...(o.script ? { script: o.script } : {}), ...(o.files ? { files: o.files } : {}) });
  const svc = await new SubmissionService(w.deps).start(startInput(run, o.start ?? {}));
  const socket = join(dir, `s${count}.sock`);
  const endpoint = await SubmitEndpoint.listen({ socketPath: socket, gateway: svc });
  open.push(endpoint);
  return { w, svc, endpoint, socket, env: { ASSAY_SUBMIT_SOCKET: socket, ASSAY_SUBMIT_TOKEN: TOKEN } };
}

const footer = (text: string, key: string) =>
  text
    .split('\n')
    .find((l) => l.startsWith(`${key}: `))
    ?.slice(key.length + 2);

describe('rsi-submit against the endpoint', () => {
  it('200 completed: exit 0 and the footer', async () => {
    const s = await serve({ script: [{ status: 'completed', rewards: { reward: 0.25, extra: 1 } }] });
    const r = await rsiSubmit(s.env);
    expect(r.code).toBe(0);
    expect(footer(r.stdout, 'round')).toBe('1');
    expect(footer(r.stdout, 'status')).toBe('completed');
    expect(footer(r.stdout, 'reward')).toBe('extra=1 reward=0.25');
    expect(footer(r.stdout, 'log')).toBe('/logs/assay/round-1.log');
    expect(r.stdout.startsWith('--- assay ---\n') && r.stdout.endsWith('--- end ---\n')).toBe(true);
  });

  it('judged but not completed (verifier_error, rule violation): exit 1', async () => {
    const s = await serve({ script: [{ status: 'verifier_error', detail: 'reward.json: value of "x" is NaN' }], start: { editablePaths: ['solve.py'] } });
    await s.svc.recordWorkspace();
    const a = await rsiSubmit(s.env);
    expect([a.code, footer(a.stdout, 'status'), footer(a.stdout, 'detail')]).toEqual([1, 'verifier_error', 'reward.json: value of "x" is NaN']);
    s.w.snapshotter.files.set('reward.json', '{"reward": 1}'); // planting a reward file gains nothing
    const b = await rsiSubmit(s.env);
    expect([b.code, footer(b.stdout, 'status'), footer(b.stdout, 'score')]).toEqual([1, 'rule_violation', 'rule violation: workspace.not_editable (scored 0)']);
    expect(s.w.judge.calls).toHaveLength(1);
  });

  it("401 without a token, with a wrong one or another run's: exit 3, nothing judged; the token file works", async () => {
    const s = await serve();
    const other = await serve();
    const none = await rsiSubmit({ ASSAY_SUBMIT_SOCKET: s.socket, ASSAY_SUBMIT_TOKEN_FILE: join(dir, 'missing') });
    expect([none.code, footer(none.stdout, 'code')]).toEqual([3, '401 SUBMIT_NO_TOKEN']);
    expect(none.stderr).toMatch(/no token/);
    const wrong = await rsiSubmit({ ...s.env, ASSAY_SUBMIT_TOKEN: generateRunToken().token });
    expect([wrong.code, footer(wrong.stdout, 'code')]).toEqual([3, '401 SUBMIT_WRONG_TOKEN']);
    // another run's token: run B's token on run A's socket
    const otherToken = generateRunToken();
    const third = await serve({ start: { tokenSha: otherToken.sha256 } });
    const cross = await rsiSubmit({ ASSAY_SUBMIT_SOCKET: s.socket, ASSAY_SUBMIT_TOKEN: otherToken.token });
    expect(cross.code).toBe(3);
    expect(s.w.judge.calls).toEqual([]);
    expect(s.svc.current.rounds).toEqual([]);
    expect(
      s.w.ledger
        .all()
        .filter((e) => e.type === 'SubmissionRejected')
        .map((e) => e.data.status),
    ).toEqual([401, 401, 401]);
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, `${TOKEN}\n`, { mode: 0o400 });
    expect((await rsiSubmit({ ASSAY_SUBMIT_SOCKET: other.socket, ASSAY_SUBMIT_TOKEN_FILE: tokenFile })).code).toBe(0);
    expect((await rsiSubmit({ ASSAY_SUBMIT_SOCKET: third.socket, ASSAY_SUBMIT_TOKEN: otherToken.token })).code).toBe(0);
  });

  it('429 for the cooldown (Retry-After), an exhausted budget and a closed run: exit 5 with the reason', async () => {
    const s = await serve({ start: { settings: { cooldownSec: 3600, maxSubmissions: 2 } } });
    expect((await rsiSubmit(s.env)).code).toBe(0);
    const c = await rsiSubmit(s.env);
    expect([c.code, footer(c.stdout, 'code')]).toEqual([5, '429 SUBMIT_COOLDOWN']);
    expect(footer(c.stdout, 'detail')).toMatch(/^cooldown: 3600 s left/);
    const h = await raw(s.socket, { headers: { Authorization: `Bearer ${TOKEN}` } });
    expect([h.status, h.headers['retry-after']]).toEqual([429, '3600']);
    s.w.clock.advance(3600_000);
    expect((await rsiSubmit(s.env)).code).toBe(0);
    s.w.clock.advance(3600_000);
    const b = await rsiSubmit(s.env);
    expect([b.code, footer(b.stdout, 'detail')]).toEqual([5, 'submission budget exhausted (2 of 2 used)']);
    await s.svc.complete();
    const closed = await rsiSubmit(s.env);
    expect([closed.code, footer(closed.stdout, 'detail')]).toEqual([5, 'run closed: the run ended (completed)']);
  });

  it('503 when the infrastructure fails: the round is refunded, exit 6, and the next submit goes through', async () => {
    const s = await serve({
      script: [{ throws: new Error('docker daemon unreachable') }, { status: 'completed' }],
      start: { settings: { cooldownSec: 3600 } },
    });
    const r = await rsiSubmit(s.env);
    expect([r.code, footer(r.stdout, 'status'), footer(r.stdout, 'code')]).toEqual([6, 'refunded', '503 SUBMIT_REFUNDED']);
    expect(footer(r.stdout, 'detail')).toMatch(/docker daemon unreachable/);
    const again = await rsiSubmit(s.env);
    expect([again.code, footer(again.stdout, 'round')]).toEqual([0, '2']);
  });

  it("--list shows this run's history only; --json parses", async () => {
    const a = await serve({ script: [{ status: 'completed', rewards: { reward: 0.5 } }] });
    const b = await serve();
    await rsiSubmit(a.env);
    await rsiSubmit(b.env);
    await rsiSubmit(b.env);
    const la = await rsiSubmit(a.env, ['--list']);
    expect(la.code).toBe(0);
    expect(la.stdout.match(/^round \d+/gm)).toEqual(['round 1']);
    expect(la.stdout).toContain(`--- assay: run ${a.svc.current.run} ---`);
    const jb = await rsiSubmit(b.env, ['--list', '--json']);
    expect(JSON.parse(jb.stdout)).toMatchObject({ run: b.svc.current.run, rounds: [{ round: 1 }, { round: 2 }] });
    expect((await rsiSubmit({ ...a.env, ASSAY_SUBMIT_TOKEN: 'x' }, ['--list'])).code).toBe(3);
  });

  it('concurrent submits are serialised into rounds 1, 2, 3, 4', async () => {
    const s = await serve();
    let active = 0;
    let most = 0;
    s.w.judge.onJudge = async () => {
      most = Math.max(most, ++active);
      await new Promise((r) => setTimeout(r, 20));
      active -= 1;
    };
    const rs = await Promise.all([1, 2, 3, 4].map(() => rsiSubmit(s.env)));
    expect(rs.map((r) => r.code)).toEqual([0, 0, 0, 0]);
    expect(rs.map((r) => Number(footer(r.stdout, 'round'))).sort()).toEqual([1, 2, 3, 4]);
    expect(most).toBe(1);
  });

  it('usage errors exit 2; an unreachable endpoint exits 7', async () => {
    expect((await rsiSubmit({}, ['--frobnicate'])).code).toBe(2);
    expect((await rsiSubmit({}, ['--json'])).code).toBe(2);
    const r = await rsiSubmit({ ASSAY_SUBMIT_SOCKET: join(dir, 'nothing.sock'), ASSAY_SUBMIT_TOKEN: TOKEN });
    expect([r.code, r.stderr]).toEqual([7, expect.stringMatching(/no submission endpoint/)]);
    expect((await rsiSubmit({}, ['--help'])).stdout).toMatch(/^rsi-submit: submit this workspace/);
  });
});

describe('the endpoint against hostile requests', () => {
  const auth = { Authorization: `Bearer ${TOKEN}` };

  it('422 for any body or query, and no round is used', async () => {
    const s = await serve();
    const cases = [
      { body: 'x', headers: { ...auth, 'Content-Length': '1' } },
      { body: '{}', headers: { ...auth, 'Content-Type': 'application/json', 'Content-Length': '2' } },
      { body: '', headers: { ...auth, 'Transfer-Encoding': 'chunked' } },
      { path: '/submit?round=7', headers: auth },
      { path: '/submit?', headers: auth },
    ];
    for (const c of cases) {
      const r = await raw(s.socket, c);
      expect([r.status, footer(r.body, 'code')]).toEqual([422, '422 SUBMIT_BAD_REQUEST']);
    }
    expect(s.svc.current.rounds).toEqual([]);
    expect(s.w.judge.calls).toEqual([]);
    expect((await raw(s.socket, { headers: { ...auth, 'Content-Length': '0' } })).status).toBe(200);
  });

  it('duplicate Authorization headers are 401; unknown paths 404; wrong methods 405; oversized headers 431', async () => {
    const s = await serve();
    const dup = await raw(s.socket, {
      rawHeaders: [
        ['Authorization', `Bearer ${TOKEN}`],
        ['Authorization', `Bearer ${TOKEN}`],
      ],
    });
    expect([dup.status, footer(dup.body, 'code')]).toEqual([401, '401 SUBMIT_MALFORMED_TOKEN']);
    expect((await raw(s.socket, { path: '/admin', headers: auth })).status).toBe(404);
    expect((await raw(s.socket, { path: '/submit/../submit', headers: auth })).status).toBe(404);
    const get = await raw(s.socket, { method: 'GET', path: '/submit', headers: auth });
    expect([get.status, get.headers.allow]).toEqual([405, 'POST']);
    expect((await raw(s.socket, { method: 'DELETE', path: '/submissions', headers: auth })).status).toBe(405);
    expect((await raw(s.socket, { method: 'GET', path: '/submissions?all=1', headers: auth })).status).toBe(422);
    const big = await raw(s.socket, { headers: { ...auth, 'X-Pad': 'x'.repeat(20_000) } }).catch((e: Error) => ({ status: -1, body: e.message }));
    expect([431, -1]).toContain(big.status);
    expect(s.svc.current.rounds).toEqual([]);
  });

  it('the socket: mode 0666, a stale one is replaced, a live one or a non-socket is refused', async () => {
    const s = await serve();
    expect(statSync(s.socket).mode & 0o777).toBe(0o666);
    await expect(SubmitEndpoint.listen({ socketPath: s.socket, gateway: s.svc })).rejects.toMatchObject({ code: 'RUN_SOCKET_IN_USE' });
    const file = join(dir, 'not-a-socket');
    writeFileSync(file, 'keep me');
    await expect(SubmitEndpoint.listen({ socketPath: file, gateway: s.svc })).rejects.toMatchObject({ code: 'RUN_SOCKET_IN_USE' });
    // a stale socket: a server that went away without removing its file
    const stale = join(dir, 'stale.sock');
    const dead = net.createServer();
    await new Promise<void>((r) => dead.listen(stale, r));
    await new Promise<void>((r) => {
      // close the listener but keep the file, as a killed process does
      (dead as unknown as { _handle: { close(): void } | null })._handle?.close();
      r();
    });
    const e = await SubmitEndpoint.listen({ socketPath: stale, gateway: s.svc });
    open.push(e);
    expect((await raw(stale, { method: 'GET', path: '/submissions', headers: auth })).status).toBe(200);
  });
});
