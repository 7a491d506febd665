/**
 * One Clock and one IdGenerator for the whole application: LedgerModule binds them (CLOCK, ID_GENERATOR) and every
 * handler and controller stamps time and ids from those providers. Here the API is built with a ManualClock and
 * SequentialIds, and what it writes over HTTP (an appended event, an API token) carries exactly their values.
 */
import { join } from 'node:path';
import type { INestApplication } from '@nestjs/common';
import { ManualClock, SequentialIds, systemClock } from '@assay/core';
import { ApiTokenStore } from '@assay/ledger';
import { createApi } from '../../apps/api/src/main';
import { buildSampleHome } from '../support/ledger-home-fixtures';
import { makeTmpDir } from '../support/ledger-fixtures';

jest.setTimeout(60_000);

let tmp: { dir: string; cleanup(): void };
let app: INestApplication;
let base: string;
let admin: string;

beforeAll(async () => {
  tmp = makeTmpDir('assay-api-clock-');
  const home = join(tmp.dir, 'home');
  await buildSampleHome(home);
  const store = new ApiTokenStore(home, { create: true });
  admin = store.create({ role: 'admin', name: 'the admin', clock: systemClock }).token;
  store.close();
  app = await createApi(
    home,
    { ASSAY_API_RATE_LIMIT: '100000' },
    { clock: new ManualClock('2031-05-06T07:08:09.000Z', 1000), ids: new SequentialIds('11111111-2222-4333-8444') },
  );
  await app.listen(0, '127.0.0.1');
  base = `http://127.0.0.1:${(app.getHttpServer().address() as { port: number }).port}`;
});
afterAll(async () => {
  await app?.close();
  tmp?.cleanup();
});

const post = (path: string, body: unknown) =>
  fetch(`${base}${path}`, { method: 'POST', headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });

describe('the API stamps time and ids from the providers it was built with', () => {
  it('an appended event carries the bound clock time and the bound id', async () => {
    const res = await post('/ledger/events', { stream: 'note-clock', events: [{ type: 'Note', data: { text: 'stamped' } }] });
    expect(res.status).toBe(201);
    const appended = (await res.json()) as { events: Array<{ id: string; position: number }> };
    expect(appended.events[0]!.id).toMatch(/^11111111-2222-4333-8444-[0-9a-f]{12}$/);
    const page = (await (await fetch(`${base}/ledger/events?stream=note-clock&from=0&limit=10`)).json()) as {
      events: Array<{ id: string; time: string; type: string }>;
    };
    expect(page.events).toHaveLength(1);
    expect(page.events[0]).toMatchObject({ id: appended.events[0]!.id, type: 'Note' });
    expect(page.events[0]!.time).toMatch(/^2031-05-06T07:08:\d{2}\.000Z$/);
  });

  it('a token created over HTTP is dated by the bound clock', async () => {
    const res = await post('/tokens', { role: 'reader', name: 'dated by the clock' });
    expect(res.status).toBe(201);
    expect(((await res.json()) as { createdAt: string }).createdAt).toMatch(/^2031-05-06T07:08:\d{2}\.000Z$/);
  });
});
