/**
 * Crash safety of the SQLite ledger: a writer process is killed with SIGKILL at random moments, again and again on
 * the same file. Each restart first retries the batch after the last acknowledged one (which may or may not have
 * been committed), and after every kill the file must be sound: integrity_check ok, every acknowledged batch
 * present exactly once, committed batches a prefix, positions dense, chains linked, and the whole ledger passes
 * verification (signatures, roles, chains, Merkle root, every checkpoint); at the end `assay ledger verify` passes.
 *
 * The seed of the random kill times is printed; CRASH_SEED=<n> replays a run.
 */
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { LedgerHome, ZERO_HASH, homePaths, initLedgerHome } from '@assay/ledger';
import { SqliteLedgerDatabase } from '../../libs/ledger/src/adapters/sqlite/sqlite-ledger-database';
import { finished, spawnTs, type ChildResult } from '../support/child-process';
import { assay } from '../support/cli';
import { makeTmpDir } from '../support/ledger-fixtures';
import { prng } from '../support/prng';
import { deps } from '../support/ledger-home-fixtures';
import { runClaimRules } from '@assay/run';
import { EVENTS_PER_BATCH, STREAMS, eventId, eventText, streamOf } from './crash-writer';

/** Events `ledger init` writes before any batch: the three key registrations. */
const KEY_EVENTS = 3;

const KILLS = 24;
const WRITER = 'tests/crash/crash-writer.ts';

const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

interface Run {
  acks: number[];
  result: ChildResult;
}

/** Starts the writer at `first`; kills it `killAfterMs` after READY (or after spawn when `beforeReady`). */
async function runWriter(file: string, first: number, killAfterMs: number, beforeReady: boolean, window: number, ackDelayMs: number): Promise<Run> {
  const child = spawnTs(WRITER, [file, String(first), '-', String(window), String(ackDelayMs)]);
  const acks: number[] = [];
  let buffered = '';
  let timer: NodeJS.Timeout | undefined;
  const kill = () => child.kill('SIGKILL');
  child.stdout.on('data', (d: Buffer) => {
    buffered += d.toString('utf8');
    let nl: number;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      const m = /^ACK (\d+)$/.exec(line);
      if (m) acks.push(Number(m[1]));
      else if (line === 'READY' && !beforeReady) timer = setTimeout(kill, killAfterMs);
    }
  });
  if (beforeReady) timer = setTimeout(kill, killAfterMs);
  const result = await finished(child, 20_000);
  if (timer) clearTimeout(timer);
  return { acks, result };
}

/** Checks the file after a kill; returns how many batches are committed. */
async function checkLedger(home: string, acked: number, where: string): Promise<number> {
  const fail = (msg: string): never => {
    throw new Error(`${where}: ${msg}`);
  };
  const h = new LedgerHome(home, deps());
  const report = await h.verify({ workers: 0, claims: runClaimRules() });
  await h.close();
  if (!report.ok) fail(`ledger verification: ${JSON.stringify(report.failure)}`);
  const db = new SqliteLedgerDatabase(homePaths(home).db);
  try {
    const integrity = db.integrityCheck();
    if (integrity.length !== 1 || integrity[0] !== 'ok') fail(`integrity_check: ${integrity.join('; ')}`);
    const heads = new Map<string, { revision: number; hash: string }>();
    let position = 0;
    let events = 0;
    for await (const batch of db.events.readAll({ batchSize: 2000 })) {
      for (const e of batch) {
        if (e.position !== position) fail(`position ${position} expected, found ${e.position} (not dense)`);
        if (position < KEY_EVENTS) {
          position++;
          continue;
        }
        const env = JSON.parse(Buffer.from(e.bytes).toString('utf8')) as { data: { text: string }; prev: string; position: number };
        const b = Math.floor((position - KEY_EVENTS) / EVENTS_PER_BATCH);
        const i = (position - KEY_EVENTS) % EVENTS_PER_BATCH;
        // committed batches form a prefix 0..m-1, each complete and in order, each exactly once
        if (env.data.text !== eventText(b, i)) fail(`position ${position} holds "${env.data.text}", expected "${eventText(b, i)}"`);
        if (e.id !== eventId(b, i)) fail(`position ${position}: id ${e.id} is not the id of batch ${b} event ${i}`);
        if (e.stream !== streamOf(b)) fail(`position ${position}: stream ${e.stream}, expected ${streamOf(b)}`);
        const expectedRevision = Math.floor(b / STREAMS) * EVENTS_PER_BATCH + i;
        if (e.revision !== expectedRevision) fail(`position ${position}: revision ${e.revision}, expected ${expectedRevision}`);
        const head = heads.get(e.stream);
        if (env.prev !== (head ? head.hash : ZERO_HASH)) fail(`position ${position}: prev does not link to the previous event of ${e.stream}`);
        if (Buffer.from(e.hash).toString('hex') !== sha(e.bytes)) fail(`position ${position}: stored hash is not SHA-256 of the bytes`);
        heads.set(e.stream, { revision: e.revision, hash: sha(e.bytes) });
        position++;
        events++;
      }
    }
    if (events % EVENTS_PER_BATCH !== 0) fail(`${events} events is not a whole number of batches (a batch was torn)`);
    const committed = events / EVENTS_PER_BATCH;
    if (committed < acked) fail(`${acked} batches acknowledged, only ${committed} committed`);
    if ((await db.events.size()) !== events + KEY_EVENTS) fail('size() disagrees with readAll');
    return committed;
  } finally {
    await db.close();
  }
}

describe('SQLite ledger crash safety', () => {
  jest.setTimeout(300_000); // 25 writer processes and ~50 verifications: about 20 s idle, several times that under load

  it(`survives ${KILLS} SIGKILLs in a row on the same file`, async () => {
    const seed = Number(process.env.CRASH_SEED ?? Date.now() % 2 ** 31);
    const random = prng(seed);
    const tmp = makeTmpDir('assay-crash-');
    const file = join(tmp.dir, 'home');
    await initLedgerHome(file, { ...deps(), origin: 'assay.test/crash' });
    let acked = 0; // batches 0..acked-1 are acknowledged
    let unackedCommitted = 0;
    let retriedCommitted = 0;
    let retriedFresh = 0;
    try {
      for (let k = 0; k < KILLS; k++) {
        const where = `seed ${seed}, kill ${k + 1}`;
        const beforeReady = random() < 0.15;
        const delay = beforeReady ? Math.floor(random() * 250) : Math.floor(random() * 60);
        const committedBefore = k === 0 ? 0 : await checkLedger(file, acked, `${where} (before)`);
        // one writer at a time with immediate acks makes kills between commit and ack rare, a pipelined writer that
        // acks late makes them common: both kinds of retry get exercised
        const pipelined = random() < 0.5;
        const run = await runWriter(file, acked, delay, beforeReady, pipelined ? 4 : 1, pipelined ? 1 : 0);
        if (run.result.signal !== 'SIGKILL') throw new Error(`${where}: writer ended without the kill: ${run.result.code} ${run.result.stderr}`);
        // acknowledgements of this run: consecutive from the retried batch
        run.acks.forEach((b, i) => {
          if (b !== acked + i) throw new Error(`${where}: ACK ${b} out of order (expected ${acked + i})`);
        });
        if (run.acks.length > 0) {
          if (committedBefore > acked) retriedCommitted++;
          else retriedFresh++;
        }
        acked += run.acks.length;
        const committed = await checkLedger(file, acked, where);
        if (committed > acked) unackedCommitted++;
      }
      // a final run to a fixed end, without a kill
      const end = acked + 10;
      const last = await finished(spawnTs(WRITER, [file, String(acked), String(end)]), 30_000);
      expect([last.code, last.stderr]).toEqual([0, '']);
      expect(last.stdout.trim().split('\n').slice(-1)).toEqual(['DONE']);
      expect(await checkLedger(file, end, `seed ${seed}, final`)).toBe(end);
      const cli = await assay(['ledger', 'verify'], file);
      expect([cli.code, cli.stderr]).toEqual([0, '']);
      expect(cli.stdout).toMatch(new RegExp(`ledger verified: ${KEY_EVENTS + end * EVENTS_PER_BATCH} events`));
      process.stdout.write(
        `crash test (seed ${seed}): ${KILLS} kills, ${end} batches; ${unackedCommitted} kills left committed but unacknowledged batches; ` +
          `the retry after the last ack was idempotent ${retriedCommitted} times and a fresh write ${retriedFresh} times\n`,
      );
      expect(acked).toBeGreaterThan(0);
      expect(retriedCommitted + retriedFresh).toBeGreaterThan(0);
      // pipelined writers that ack late are killed between commit and ack nearly every time
      expect(unackedCommitted).toBeGreaterThan(0);
    } finally {
      tmp.cleanup();
    }
  });
});
