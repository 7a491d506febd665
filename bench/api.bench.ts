/**
 * `npm run bench:api`: the HTTP API's reads, measured by autocannon from this process while the API serves from a
 * child process (so the load generator does not share the server's event loop). The ledger: the sample's task and
 * image events, 200 sample runs (examples/ledger/sample-run.jsonl, 40 events each) and 20,000 Notes in 2,000 streams,
 * with a signed checkpoint after them (about 28,000 events). Under a minute in all.
 *
 * 1. GET /ledger/keys against GET /health (10 connections, 2 s each), and the first, cold keys request, which reads
 *    the whole log once: before the cached key registry every request paid that.
 * 2. GET /leaderboards/tiny-optimizer (200 rows) and GET /ledger/events?from=0&limit=100 at 64 connections against a
 *    bare node:http server in a sibling child process (the same process model) that answers the same path with the
 *    exact bytes and content type the API answered (fetched from the API once first); 3 s of the API then 3 s of bare,
 *    three times, the median pair's ratio kept; target: API >= 0.5 of bare req/s. Also the first, cold leaderboard
 *    request (it verifies the ledger and projects the read models).
 * 3. For context: a minimal NestJS application on Fastify (the API's adapter) answering the same bytes, against bare
 *    right after it (what the framework costs before anything of the API's own).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { randomIds, systemClock } from '@assay/core';
import { LedgerHome } from '@assay/ledger';
import { Controller, Get, Module, Req, Res } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { createApi } from '../apps/api/src/main';
import { report } from './bench-util';
import { buildSampleRunsHome } from './projections.bench';

interface Load {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
}

async function load(url: string, seconds: number, connections: number): Promise<Load> {
  const r = await autocannon({ url, duration: seconds, connections });
  return { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, errors: r.errors + r.timeouts + r.non2xx };
}

/** The child: serve the API on the home given, print the port. */
async function serve(home: string): Promise<void> {
  // The default rate limit (600 requests per minute per address and route) would answer most of the load 429.
  const app = await createApi(home, { ...process.env, ASSAY_API_RATE_LIMIT: '1000000' });
  await app.listen(0, '127.0.0.1');
  process.send?.({ port: (app.getHttpServer().address() as { port: number }).port });
  process.on('disconnect', () => void app.close().then(() => process.exit(0)));
}

type Routes = Record<string, { type: string; body: string }>;

/** The bare child: a node:http server answering each path of the routes it is sent with their bytes (base64). */
function serveBare(): void {
  process.once('message', (routes: Routes) => {
    const answers = new Map(Object.entries(routes).map(([path, r]) => [path, { type: r.type, body: Buffer.from(r.body, 'base64') }]));
    const server = createServer((req, res) => {
      const a = answers.get(req.url ?? '');
      if (!a) {
        res.writeHead(404).end();
        return;
      }
      res.writeHead(200, { 'content-type': a.type, 'content-length': a.body.byteLength });
      res.end(a.body);
    });
    server.listen(0, '127.0.0.1', () => process.send?.({ port: (server.address() as { port: number }).port }));
    process.on('disconnect', () => server.close(() => process.exit(0)));
  });
}

/**
 * The framework floor, for context: a minimal NestJS application on Fastify (one controller, no hook, guard, pipe or
 * filter) answering each path of the routes with their bytes, as the API's kept answers are sent. What NestJS on
 * Fastify costs before anything of the API's own.
 */
function serveNestFloor(): void {
  process.once('message', (routes: Routes) => {
    void (async () => {
      const answers = new Map(Object.entries(routes).map(([path, r]) => [path, { type: r.type, body: Buffer.from(r.body, 'base64') }]));
      @Controller()
      class FloorController {
        @Get('*')
        answer(@Req() req: FastifyRequest, @Res() res: FastifyReply): void {
          const a = answers.get(req.url);
          if (!a) {
            res.code(404).send();
            return;
          }
          res.header('content-type', a.type);
          res.code(200).send(a.body);
        }
      }
      @Module({ controllers: [FloorController] })
      class FloorModule {}
      const app = await NestFactory.create(FloorModule, new FastifyAdapter(), { logger: false });
      await app.listen(0, '127.0.0.1');
      process.send?.({ port: (app.getHttpServer().address() as { port: number }).port });
      process.on('disconnect', () => void app.close().then(() => process.exit(0)));
    })();
  });
}

/** Forks this file with `args`, sends it `message` if any, and resolves with the port it reports. */
async function child(args: string[], message?: Routes): Promise<{ child: ChildProcess; url: string }> {
  const c = fork(__filename, args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const port = await new Promise<number>((res, rej) => {
    c.once('message', (m: { port: number }) => res(m.port));
    c.once('exit', (code) => rej(new Error(`the ${args[0]} child exited with ${code}`)));
    if (message) c.send(message);
  });
  return { child: c, url: `http://127.0.0.1:${port}` };
}

async function stop(c: ChildProcess): Promise<void> {
  if (c.exitCode !== null) return;
  const exited = new Promise((r) => c.once('exit', r));
  c.disconnect();
  await exited;
}

const ms = (n: number): string => `${n.toFixed(1)} ms`;
const line = (name: string, l: Load): string =>
  `${name}: ${l.rps.toFixed(0)} req/s, p50 ${ms(l.p50)}, p99 ${ms(l.p99)}, ${l.errors} errors (non-2xx included)\n`;

async function main(): Promise<void> {
  const started = performance.now();
  const dir = mkdtempSync(join(tmpdir(), 'assay-bench-api-'));
  const children: ChildProcess[] = [];
  try {
    const home = join(dir, 'home');
    await buildSampleRunsHome(home, 200, 'assay.bench/api');
    const w = new LedgerHome(home, { clock: systemClock, ids: randomIds });
    for (let b = 0; b < 20; b++)
      await w.ledger.appendGenericMany(
        Array.from({ length: 100 }, (_, s) => ({
          stream: `note-${b}-${s}`,
          events: Array.from({ length: 10 }, (_, i) => ({ type: 'Note', data: { text: `note ${b}.${s}.${i}` } })),
        })),
      );
    await w.ledger.checkpoint();
    const events = await w.db.events.size();
    await w.close();

    const api = await child(['--serve', home]);
    children.push(api.child);
    const url = api.url;

    // 1. keys against health, as before.
    let t = performance.now();
    await (await fetch(`${url}/ledger/keys`)).text();
    const cold = performance.now() - t;
    const health = await load(`${url}/health`, 2, 10);
    const keys = await load(`${url}/ledger/keys`, 2, 10);
    process.stdout.write(
      `ledger: ${events} events (200 sample runs, 20,000 Notes; checkpointed)\n` +
        `GET /ledger/keys, first (cold, reads the log once): ${cold.toFixed(1)} ms\n` +
        `(autocannon, 10 connections, 2 s each)\n` +
        line('GET /health     ', health) +
        line('GET /ledger/keys', keys) +
        `ratio keys/health req/s: ${(keys.rps / health.rps).toFixed(2)}\n`,
    );

    // 2. leaderboard and a page of events against a bare server answering the same bytes.
    const paths = ['/leaderboards/tiny-optimizer', '/ledger/events?from=0&limit=100'];
    t = performance.now();
    const first = await fetch(`${url}${paths[0]}`);
    await first.arrayBuffer();
    const coldBoard = performance.now() - t;
    if (first.status !== 200) throw new Error(`GET ${paths[0]} answered ${first.status}`);
    const routes: Routes = {};
    for (const p of paths) {
      const r = await fetch(`${url}${p}`);
      if (r.status !== 200) throw new Error(`GET ${p} answered ${r.status}`);
      routes[p] = { type: r.headers.get('content-type') ?? '', body: Buffer.from(await r.arrayBuffer()).toString('base64') };
    }
    const board = JSON.parse(Buffer.from(routes[paths[0] as string]!.body, 'base64').toString('utf8')) as { groups: Array<{ rows: unknown[] }> };
    const rows = board.groups.reduce((n, g) => n + g.rows.length, 0);
    const bare = await child(['--bare'], routes);
    children.push(bare.child);
    for (const p of paths) {
      const r = await fetch(`${bare.url}${p}`);
      const body = Buffer.from(await r.arrayBuffer()).toString('base64');
      if (body !== routes[p]!.body || r.headers.get('content-type') !== routes[p]!.type)
        throw new Error(`the bare server does not answer ${p} as the API does`);
    }
    process.stdout.write(
      `GET ${paths[0]}, first (cold: verifies the ledger, projects the read models): ${coldBoard.toFixed(0)} ms; ${rows} rows\n` +
        `(autocannon, 64 connections; after 1 s of warm-up each, 3 s of the API then 3 s of bare, three times; bare: node:http in a sibling child process, same bytes and content type)\n`,
    );
    // Interleaved, three times each after one warm-up of each: this machine's speed drifts within seconds, so each
    // API figure is compared with the bare figure measured right after it, and the median of those ratios is kept.
    const rowsOut = [];
    for (const p of paths) {
      const size = Buffer.from(routes[p]!.body, 'base64').byteLength;
      await load(`${url}${p}`, 1, 64);
      await load(`${bare.url}${p}`, 1, 64);
      const pairs: Array<{ a: Load; b: Load }> = [];
      for (let i = 0; i < 3; i++) {
        const a = await load(`${url}${p}`, 3, 64);
        const b = await load(`${bare.url}${p}`, 3, 64);
        pairs.push({ a, b });
        process.stdout.write(line(`GET ${p} (${size} bytes), API `, a) + line(`GET ${p} (${size} bytes), bare`, b));
      }
      const { a, b } = [...pairs].sort((x, y) => x.a.rps / x.b.rps - y.a.rps / y.b.rps)[1]!;
      rowsOut.push({
        name: `GET ${p}, 64 connections (median of 3 interleaved pairs)`,
        figure: a.rps,
        baseline: b.rps,
        unit: 'req/s',
        target: 0.5,
        baselineName: 'bare node:http, same bytes',
      });
    }
    // Context: the framework's own floor on the first path, against bare right after it.
    const floor = await child(['--nest-floor'], routes);
    children.push(floor.child);
    const fp = paths[0] as string;
    await load(`${floor.url}${fp}`, 1, 64);
    const f = await load(`${floor.url}${fp}`, 2, 64);
    const fb = await load(`${bare.url}${fp}`, 2, 64);
    process.stdout.write(
      line(`GET ${fp}, minimal NestJS on Fastify (context)`, f) +
        line(`GET ${fp}, bare (right after it)`, fb) +
        `for context, minimal NestJS on Fastify / bare: ${(f.rps / fb.rps).toFixed(3)}\n`,
    );
    const ok = report(rowsOut);
    process.stdout.write(`${ok ? 'all targets met' : 'some targets NOT met'} (${((performance.now() - started) / 1000).toFixed(1)} s in all)\n`);
  } finally {
    for (const c of children) await stop(c);
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[2] === '--serve') void serve(process.argv[3] as string);
else if (process.argv[2] === '--bare') serveBare();
else if (process.argv[2] === '--nest-floor') serveNestFloor();
else void main();
