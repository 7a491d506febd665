/**
 * `npm run bench:api`: GET /ledger/keys against GET /health on a 20,000-event ledger, in one run, measured by
 * autocannon (10 connections, 3 s each) from this process while the API serves from a child process (so the load
 * generator does not share the server's event loop). Also times the first, cold keys request, which reads the whole
 * log once: before the cached key registry every request paid that.
 */
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { randomIds, systemClock } from '@assay/core';
import { LedgerHome } from '@assay/ledger';
import { createApi } from '../apps/api/src/main';

async function load(url: string, seconds: number, connections: number): Promise<{ rps: number; p99: number; errors: number }> {
  const r = await autocannon({ url, duration: seconds, connections });
  return { rps: r.requests.average, p99: r.latency.p99, errors: r.errors + r.non2xx };
}

/** The child: serve the API on the home given, print the port. */
async function serve(home: string): Promise<void> {
  // The default rate limit (600 requests per minute per address and route) would answer most of the load 429.
  const app = await createApi(home, { ...process.env, ASSAY_API_RATE_LIMIT: '1000000' });
  await app.listen(0, '127.0.0.1');
  process.send?.({ port: (app.getHttpServer().address() as { port: number }).port });
  process.on('disconnect', () => void app.close().then(() => process.exit(0)));
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
    const child = fork(__filename, ['--serve', home], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    const port = await new Promise<number>((res, rej) => {
      child.once('message', (m: { port: number }) => res(m.port));
      child.once('exit', (code) => rej(new Error(`the API child exited with ${code}`)));
    });
    const url = `http://127.0.0.1:${port}`;
    try {
      const t = performance.now();
      await (await fetch(`${url}/ledger/keys`)).text();
      const cold = performance.now() - t;
      const health = await load(`${url}/health`, 3, 10);
      const keys = await load(`${url}/ledger/keys`, 3, 10);
      process.stdout.write(
        `ledger: ${events} events (autocannon, 10 connections, 3 s each)\n` +
          `GET /ledger/keys, first (cold, reads the log once): ${cold.toFixed(1)} ms\n` +
          `GET /health:      ${health.rps.toFixed(0)} req/s, p99 ${health.p99.toFixed(1)} ms, ${health.errors} errors\n` +
          `GET /ledger/keys: ${keys.rps.toFixed(0)} req/s, p99 ${keys.p99.toFixed(1)} ms, ${keys.errors} errors\n` +
          `ratio keys/health req/s: ${(keys.rps / health.rps).toFixed(2)}\n`,
      );
    } finally {
      child.disconnect();
      await new Promise((r) => child.once('exit', r));
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[2] === '--serve') void serve(process.argv[3] as string);
else void main();
