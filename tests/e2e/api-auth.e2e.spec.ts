/**
 * No anonymous writes, and no GET ever writes. The HTTP API on loopback over a real ledger:
 * - without an operator token it serves reads and refuses every write (403, saying how to create a token);
 * - with one (`assay api token create`, only its SHA-256 stored), a write without the token or with a wrong one is
 *   401, the right one is accepted; rotation makes the old token useless at once;
 * - `GET /ledger/proofs/inclusion/N` for a position no signed checkpoint covers is 409 and signs nothing, and no
 *   GET route changes the database or the witness file.
 */
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import type { INestApplication } from '@nestjs/common';
import { homePaths, operatorTokenPath, parseInclusionProof, initLedgerHome } from '@assay/ledger';
import { createApi } from '../../apps/api/src/main';
import { assay } from '../support/cli';
import { makeTmpDir } from '../support/ledger-fixtures';
import { deps } from '../support/ledger-home-fixtures';

jest.setTimeout(60_000);

interface ErrorBody {
  error: { code: string; kind: string; message: string; details: Record<string, unknown> };
}

describe('HTTP API: operator token and read-only GETs', () => {
  let tmp: { dir: string; cleanup(): void };
  let home: string;
  let app: INestApplication;
  let base: string;

  beforeAll(async () => {
    tmp = makeTmpDir('assay-api-auth-');
    home = join(tmp.dir, 'home');
    await initLedgerHome(home, { ...deps(), origin: 'assay.test/api-auth' });
    app = await createApi(home, {});
    await app.listen(0, '127.0.0.1');
    base = `http://127.0.0.1:${(app.getHttpServer().address() as { port: number }).port}`;
  });
  afterAll(async () => {
    await app.close();
    tmp.cleanup();
  });

  const note = (text: string) => ({ stream: 'note-auth', events: [{ type: 'Note', data: { text } }] });
  const post = (path: string, body?: unknown, authorization?: string) =>
    fetch(`${base}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(authorization !== undefined ? { authorization } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });

  /** What a reader sees of the stored state: every table's rows, and the witness file. */
  function stored(): { events: number; checkpoints: string; merkle: number; schema: string; witness: string } {
    const db = new Database(homePaths(home).db, { readonly: true });
    try {
      return {
        events: db.prepare('SELECT count(*) FROM events').pluck().get() as number,
        checkpoints: JSON.stringify(db.prepare('SELECT seq, tree_size, root_hash, note FROM checkpoints ORDER BY seq').all()),
        merkle: db.prepare('SELECT count(*) FROM merkle_nodes').pluck().get() as number,
        schema: JSON.stringify(db.prepare('SELECT * FROM schema_version ORDER BY version').all()),
        witness: readFileSync(homePaths(home).witness, 'utf8'),
      };
    } finally {
      db.close();
    }
  }

  async function expectError(res: Response, status: number, code: string): Promise<ErrorBody['error']> {
    expect(res.status).toBe(status);
    expect(res.headers.get('content-type')).toMatch(/application\/json/);
    const body = (await res.json()) as ErrorBody;
    expect(Object.keys(body)).toEqual(['error']);
    expect(body.error.code).toBe(code);
    expect(Object.keys(body.error).sort()).toEqual(['code', 'details', 'kind', 'message', 'requestId']);
    expect(JSON.stringify(body)).not.toMatch(/\n\s+at |\.ts:\d+/); // no stack trace
    return body.error;
  }

  let token = '';

  it('without an operator token: reads are served, every write is refused with 403 and how to create a token', async () => {
    const before = stored();
    expect((await fetch(`${base}/health`)).status).toBe(200);
    expect((await fetch(`${base}/ledger/keys`)).status).toBe(200);
    const e1 = await expectError(await post('/ledger/events', note('anonymous')), 403, 'API_READ_ONLY');
    expect(e1.message).toMatch(/assay api token create/);
    expect(e1.message).toMatch(/Authorization: Bearer/);
    await expectError(await post('/ledger/checkpoints'), 403, 'API_READ_ONLY');
    // A token in the request changes nothing while none is configured.
    await expectError(await post('/ledger/checkpoints', undefined, 'Bearer assay-op-guess'), 403, 'API_READ_ONLY');
    expect(stored()).toEqual(before);
  });

  it('`assay api token create` prints the token once and stores only its SHA-256, mode 0600', async () => {
    const r = await assay(['api', 'token', 'create'], home);
    expect(r.stderr).toMatch(/only time the token is shown/);
    expect(r.code).toBe(0);
    token = r.stdout.trim();
    expect(token).toMatch(/^assay-op-[A-Za-z0-9_-]{43}$/);
    const file = operatorTokenPath(home);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(join(home, 'api')).mode & 0o777).toBe(0o700);
    const text = readFileSync(file, 'utf8');
    expect(text).not.toContain(token);
    expect(text).not.toContain(token.slice(9, 30));
    expect(JSON.parse(text)).toMatchObject({ format: 'assay-api-token/v1', sha256: expect.stringMatching(/^[0-9a-f]{64}$/) });
    // A second create does not silently replace it.
    const again = await assay(['api', 'token', 'create'], home);
    expect(again.code).toBe(4);
    expect(again.stderr).toMatch(/API_TOKEN_EXISTS/);
  });

  it('with a token: anonymous and wrong-token writes are 401 (nothing stored), the right token is accepted', async () => {
    const before = stored();
    const anonymous = await post('/ledger/events', note('anonymous'));
    expect(anonymous.headers.get('www-authenticate')).toMatch(/^Bearer/);
    await expectError(anonymous, 401, 'API_UNAUTHENTICATED');
    await expectError(await post('/ledger/checkpoints'), 401, 'API_UNAUTHENTICATED');
    const wrong = token.slice(0, -1) + (token.endsWith('A') ? 'B' : 'A');
    expect((await expectError(await post('/ledger/events', note('wrong')), 401, 'API_UNAUTHENTICATED')).message).toMatch(/Authorization: Bearer/);
    expect((await expectError(await post('/ledger/events', note('wrong'), `Bearer ${wrong}`), 401, 'API_UNAUTHENTICATED')).message).toMatch(/wrong/);
    await expectError(await post('/ledger/events', note('wrong'), `Basic ${Buffer.from(`x:${token}`).toString('base64')}`), 401, 'API_UNAUTHENTICATED');
    await expectError(await post('/ledger/events', note('wrong'), token), 401, 'API_UNAUTHENTICATED');
    // An invalid body without the token is refused for the token, before it is even looked at.
    await expectError(await post('/ledger/events', { nonsense: true }), 401, 'API_UNAUTHENTICATED');
    expect(stored()).toEqual(before);

    const ok = await post('/ledger/events', note('with the token'), `Bearer ${token}`);
    expect(ok.status).toBe(201);
    expect(((await ok.json()) as { lastPosition: number }).lastPosition).toBe(before.events);
    const cp = await post('/ledger/checkpoints', undefined, `bearer ${token}`);
    expect(cp.status).toBe(201);
    expect(await cp.text()).toMatch(new RegExp(`^assay.test/api-auth\\n${before.events + 1}\\n`));
  });

  it('GET inclusion of a position no signed checkpoint covers is 409 and signs nothing; no GET writes anything', async () => {
    const appended = await post('/ledger/events', note('not yet checkpointed'), `Bearer ${token}`);
    const position = ((await appended.json()) as { lastPosition: number }).lastPosition;
    const before = stored();
    const files = ['ledger.db', 'ledger.db-wal'].map((f) => join(homePaths(home).ledgerDir, f));
    const sizes = () =>
      files.map((f) => {
        try {
          const s = statSync(f);
          return `${s.size}/${s.mtimeMs}`;
        } catch {
          return 'absent';
        }
      });
    const filesBefore = sizes();

    const e = await expectError(await fetch(`${base}/ledger/proofs/inclusion/${position}`), 409, 'LEDGER_NOT_CHECKPOINTED');
    expect(e.message).toMatch(/POST \/ledger\/checkpoints/);
    expect(e.details).toMatchObject({ position, checkpointSize: position });
    // Every other GET route, including ones that read the whole log and the part not yet indexed.
    const covered = await fetch(`${base}/ledger/proofs/inclusion/${position - 1}`);
    expect(covered.status).toBe(200);
    const coveredProof = parseInclusionProof(await covered.text());
    expect(coveredProof.position).toBe(position - 1);
    expect(coveredProof.checkpoint).toBe(JSON.parse(before.checkpoints).at(-1).note);
    expect((await fetch(`${base}/ledger/proofs/consistency?old=1`)).status).toBe(200);
    expect((await fetch(`${base}/ledger/proofs/consistency?old=2&new=${position + 1}`)).status).toBe(200);
    expect((await fetch(`${base}/ledger/keys`)).status).toBe(200);
    const v = await fetch(`${base}/ledger/verify`);
    expect(v.status).toBe(200);
    expect((await fetch(`${base}/ledger/proofs/inclusion/999`)).status).toBe(404);
    expect((await fetch(`${base}/health`, { method: 'HEAD' })).status).toBe(200);

    expect(stored()).toEqual(before);
    expect(sizes()).toEqual(filesBefore);

    // Once a checkpoint is POSTed, the same GET proves the position.
    expect((await post('/ledger/checkpoints', undefined, `Bearer ${token}`)).status).toBe(201);
    const proof = await fetch(`${base}/ledger/proofs/inclusion/${position}`);
    expect(proof.status).toBe(200);
    const p = parseInclusionProof(await proof.text());
    expect(p.position).toBe(position);
    expect(p.checkpoint).toMatch(new RegExp(`^assay.test/api-auth\\n${position + 1}\\n`));
  });

  it('rotation (`--rotate`) makes the old token useless at once; `delete` returns the API to reads only', async () => {
    const r = await assay(['api', 'token', 'create', '--rotate'], home);
    expect(r.code).toBe(0);
    const rotated = r.stdout.trim();
    expect(rotated).not.toBe(token);
    await expectError(await post('/ledger/events', note('old token'), `Bearer ${token}`), 401, 'API_UNAUTHENTICATED');
    expect((await post('/ledger/events', note('new token'), `Bearer ${rotated}`)).status).toBe(201);
    const d = await assay(['api', 'token', 'delete'], home);
    expect(d.code).toBe(0);
    await expectError(await post('/ledger/events', note('after delete'), `Bearer ${rotated}`), 403, 'API_READ_ONLY');
  });
});
