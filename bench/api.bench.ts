/**
 * `npm run bench:api`: GET /ledger/keys against GET /health on a 20,000-event ledger, in one run, 10 concurrent
 * clients for 3 s each (plain fetch loops; autocannon is not a dependency). Also times the first, cold keys request,
 * which reads the whole log once: before the cached key registry every request paid that.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomIds, systemClock } from '@assay/core';
import { LedgerHome } from '@assay/ledger';
import { createApi } from '../apps/api/src/main';

async function load(url: string, seconds: number, clients: number): Promise<{ rps: number; p99: number }> {
  const lat: number[] = [];
  const start = performance.now();
  const end = start + seconds * 1000;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (performance.now() < end) {
        const s = performance.now();
        await (await fetch(url)).text();
        lat.push(performance.now() - s);
      }
    }),
  );
  lat.sort((a, b) => a - b);
  return { rps: lat.length / ((performance.now() - start) / 1000), p99: lat[Math.floor(lat.length * 0.99)] ?? NaN };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'assay-bench-api-'));
  try {
    const home = join(dir, 'home');
    await LedgerHome.init(home, { clock: systemClock, ids: randomIds, origin: 'assay.bench/api' });
    const w = await LedgerHome.open(home, { clock: systemClock, ids: randomIds });
    for (let b = 0; b < 20; b++)
      await w.ledger.appendGenericMany(
        Array.from({ length: 100 }, (_, s) => ({
          stream: `note-${b}-${s}`,
          events: Array.from({ length: 10 }, (_, i) => ({ type: 'Note', data: { text: `note ${b}.${s}.${i}` } })),
        })),
      );
    const events = await w.db.events.size();
    await w.close();
    const app = await createApi(home);
    await app.listen(0, '127.0.0.1');
    const url = `http://127.0.0.1:${(app.getHttpServer().address() as { port: number }).port}`;
    try {
      const t = performance.now();
      await (await fetch(`${url}/ledger/keys`)).text();
      const cold = performance.now() - t;
      const health = await load(`${url}/health`, 3, 10);
      const keys = await load(`${url}/ledger/keys`, 3, 10);
      process.stdout.write(
        `ledger: ${events} events\n` +
          `GET /ledger/keys, first (cold, reads the log once): ${cold.toFixed(1)} ms\n` +
          `GET /health:      ${health.rps.toFixed(0)} req/s, p99 ${health.p99.toFixed(1)} ms\n` +
          `GET /ledger/keys: ${keys.rps.toFixed(0)} req/s, p99 ${keys.p99.toFixed(1)} ms\n` +
          `ratio keys/health req/s: ${(keys.rps / health.rps).toFixed(2)}\n`,
      );
    } finally {
      await app.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

void main();
