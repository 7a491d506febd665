/** The HTTP API over a real ledger: same commands and queries as the CLI, errors translated to statuses. */
import { join } from 'node:path';
import type { INestApplication } from '@nestjs/common';
import { systemClock } from '@assay/core';
import { createOperatorToken, parseInclusionProof, parseNote, parseCheckpointBody, initLedgerHome } from '@assay/ledger';
import { createApi } from '../../apps/api/src/main';
import { makeTmpDir } from '../support/ledger-fixtures';
import { deps } from '../support/ledger-home-fixtures';

describe('HTTP API (ledger)', () => {
  let tmp: { dir: string; cleanup(): void };
  let app: INestApplication;
  let base: string;
  let token: string;

  beforeAll(async () => {
    tmp = makeTmpDir('assay-api-');
    const home = join(tmp.dir, 'home');
    await initLedgerHome(home, { ...deps(), origin: 'assay.test/api' });
    token = createOperatorToken(home, { clock: systemClock }).token;
    app = await createApi(home);
    await app.listen(0, '127.0.0.1');
    const addr = app.getHttpServer().address() as { port: number };
    base = `http://127.0.0.1:${addr.port}`;
  });
  afterAll(async () => {
    await app.close();
    tmp.cleanup();
  });

  const post = (path: string, body?: unknown) =>
    fetch(`${base}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: body === undefined ? undefined : JSON.stringify(body),
    });

  it('appends, checkpoints, proves and verifies', async () => {
    const res = await post('/ledger/events', { stream: 'note-api', expectedRevision: 'no_stream', events: [{ type: 'Note', data: { text: 'from HTTP' } }] });
    expect(res.status).toBe(201);
    const body = (await res.json()) as { lastPosition: number; idempotent: boolean };
    expect(body).toMatchObject({ lastPosition: 3, idempotent: false });

    const cp = await post('/ledger/checkpoints');
    expect(cp.status).toBe(201);
    expect(parseCheckpointBody(parseNote(await cp.text()).body)).toMatchObject({ origin: 'assay.test/api', treeSize: 4 });

    const proof = await fetch(`${base}/ledger/proofs/inclusion/3`);
    expect(parseInclusionProof(await proof.text()).position).toBe(3);

    const v = (await (await fetch(`${base}/ledger/verify`)).json()) as { ok: boolean; events: number };
    expect(v).toMatchObject({ ok: true, events: 4 });
  });

  it('answers bad requests with the error code and a 4xx status, and stores nothing', async () => {
    const wrongRevision = await post('/ledger/events', {
      stream: 'note-api',
      expectedRevision: 'no_stream',
      events: [{ type: 'Note', data: { text: 'again' } }],
    });
    expect(wrongRevision.status).toBe(409);
    expect(((await wrongRevision.json()) as { error: { code: string } }).error.code).toBe('LEDGER_WRONG_EXPECTED_REVISION');

    const unknown = await post('/ledger/events', { stream: 'note-api', events: [{ type: 'Bogus', data: {} }] });
    expect(unknown.status).toBe(422);
    expect(((await unknown.json()) as { error: { code: string } }).error.code).toBe('LEDGER_UNKNOWN_EVENT_TYPE');

    const malformed = await post('/ledger/events', { stream: 'note-api', events: 'nope' });
    expect(malformed.status).toBe(422); // a DTO failure names the field (docs/operations.md, API)
    expect(((await malformed.json()) as { error: { code: string; message: string } }).error).toMatchObject({
      code: 'API_INVALID_BODY',
      message: expect.stringContaining('events'),
    });

    const outOfRange = await fetch(`${base}/ledger/proofs/inclusion/999`);
    expect(outOfRange.status).toBe(404);

    const v = (await (await fetch(`${base}/ledger/verify`)).json()) as { ok: boolean; events: number };
    expect(v).toMatchObject({ ok: true, events: 4 });
  });
});
