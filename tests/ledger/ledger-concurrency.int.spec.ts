/**
 * One writer where order matters: several processes append to and sign checkpoints of one ASSAY_HOME at the same
 * time (as `assay ledger append`, `assay ledger checkpoint`, `assay ledger prove` and the API may), round after
 * round. After every round, with the workers idle:
 * - the whole ledger passes verification;
 * - every stored checkpoint is of a size the log has reached (never above the number of events), sizes strictly
 *   grow in issue order, and each signed root is the root recomputed from the stored events at that size (so
 *   each is consistent with every other);
 * - the Merkle node table indexes no more leaves than there are events, and agrees with the recomputed tree;
 * - `checkpoint.last` is not behind the database's last checkpoint and is a true checkpoint of the log.
 * Before the Merkle integration and the signing ran under one write lock, such a run stored checkpoints of sizes
 * the log never had (its leaves integrated twice) and failed verification for good.
 *
 * The seed is printed; CONCURRENCY_SEED=<n> replays a run (the interleaving still depends on the scheduler).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { MemoryMerkleNodeStore, homePaths, leafHash, parseCheckpointBody, parseNote, rootAt, initLedgerHome } from '@assay/ledger';
import { SqliteLedgerDatabase } from '../../libs/ledger/src/adapters/sqlite/sqlite-ledger-database';
import { spawnTs } from '../support/child-process';
import { makeTmpDir } from '../support/ledger-fixtures';
import { deps, verifyHome } from '../support/ledger-home-fixtures';

const WORKER = 'tests/ledger/concurrent-ledger-worker.ts';
const APPENDERS = 3;
const CHECKPOINTERS = 4;
const ROUNDS = 5;
const APPENDS_PER_ROUND = 40;
const CHECKPOINTS_PER_ROUND = 25;

jest.setTimeout(120_000);

interface Worker {
  name: string;
  child: ChildProcessWithoutNullStreams;
  lines: string[];
  waiters: Array<() => void>;
  stderr: string;
}

function start(home: string, role: 'append' | 'checkpoint', seed: number, name: string): Worker {
  const child = spawnTs(WORKER, [home, role, String(seed)]);
  const w: Worker = { name, child, lines: [], waiters: [], stderr: '' };
  let buffered = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    buffered += d;
    let nl: number;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      w.lines.push(buffered.slice(0, nl));
      buffered = buffered.slice(nl + 1);
    }
    for (const f of w.waiters.splice(0)) f();
  });
  child.stderr.setEncoding('utf8').on('data', (d: string) => (w.stderr += d));
  child.on('close', () => {
    for (const f of w.waiters.splice(0)) f();
  });
  return w;
}

/** Resolves with the first line matching `re` (waits for it); fails if the worker exits first or after `ms`. */
async function expectLine(w: Worker, re: RegExp, ms = 90_000): Promise<string> {
  const deadline = Date.now() + ms;
  for (;;) {
    const found = w.lines.find((l) => re.test(l));
    if (found) return found;
    if (w.child.exitCode !== null || w.child.signalCode !== null)
      throw new Error(`${w.name} exited (${w.child.exitCode ?? w.child.signalCode}) before printing ${re}: ${w.stderr.slice(-2000)}`);
    if (Date.now() > deadline) throw new Error(`${w.name}: no ${re} after ${ms} ms`);
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, 200);
      w.waiters.push(() => {
        clearTimeout(t);
        resolve();
      });
    });
  }
}

/** Everything the round must leave true, checked from the stored bytes alone. */
async function checkStore(home: string, round: number): Promise<{ events: number; checkpoints: number }> {
  const where = `after round ${round}`;
  const report = await verifyHome(home);
  if (!report.ok) throw new Error(`${where}: verification failed: ${JSON.stringify(report.failure)}`);
  const db = new SqliteLedgerDatabase(homePaths(home).db, { readOnly: true });
  try {
    const tree = new MemoryMerkleNodeStore();
    for await (const batch of db.events.readAll({ batchSize: 2000 })) tree.appendLeaves(batch.map((e) => leafHash(e.bytes)));
    const size = tree.leafCount();
    const node = (l: number, i: number) => tree.node(l, i);
    const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');
    const cps = db.checkpoints.all();
    let previous = -1;
    for (const cp of cps) {
      const what = `${where}: checkpoint seq ${cp.seq} (size ${cp.treeSize}, log ${size})`;
      if (cp.treeSize > size) throw new Error(`${what}: larger than the log`);
      if (cp.treeSize <= previous) throw new Error(`${what}: not larger than the one before (${previous})`);
      if (cp.rootHash !== b64(rootAt(cp.treeSize, node))) throw new Error(`${what}: root is not the log's root at that size`);
      const body = parseCheckpointBody(parseNote(cp.note).body);
      if (body.treeSize !== cp.treeSize || b64(body.rootHash) !== cp.rootHash) throw new Error(`${what}: columns differ from the signed note`);
      previous = cp.treeSize;
    }
    const indexed = db.merkleNodes.leafCount();
    if (indexed > size) throw new Error(`${where}: merkle_nodes indexes ${indexed} leaves, the log has ${size} events`);
    if (indexed > 0 && b64(rootAt(indexed, (l, i) => db.merkleNodes.node(l, i))) !== b64(rootAt(indexed, node)))
      throw new Error(`${where}: merkle_nodes disagrees with the tree recomputed from the events at size ${indexed}`);
    const witness = JSON.parse(readFileSync(homePaths(home).witness, 'utf8')) as { treeSize: number; rootHash: string };
    const last = cps[cps.length - 1]!;
    if (witness.treeSize < last.treeSize)
      throw new Error(`${where}: checkpoint.last (size ${witness.treeSize}) is behind the database (size ${last.treeSize})`);
    if (witness.treeSize > size || witness.rootHash !== b64(rootAt(witness.treeSize, node)))
      throw new Error(`${where}: checkpoint.last (size ${witness.treeSize}) is not a checkpoint of the log`);
    return { events: size, checkpoints: cps.length };
  } finally {
    await db.close();
  }
}

describe('concurrent appenders and checkpointers on one ASSAY_HOME', () => {
  it(`${APPENDERS} appenders and ${CHECKPOINTERS} checkpointers, ${ROUNDS} rounds: every round verifies and every checkpoint is true`, async () => {
    const seed = Number(process.env.CONCURRENCY_SEED ?? Math.floor(Math.random() * 2 ** 31));
    process.stdout.write(`ledger-concurrency: CONCURRENCY_SEED=${seed}\n`);
    const tmp = makeTmpDir('assay-concurrency-');
    const home = join(tmp.dir, 'home');
    await initLedgerHome(home, { ...deps(), origin: 'assay.test/concurrency' });
    const workers: Worker[] = [];
    try {
      for (let i = 0; i < APPENDERS; i++) workers.push(start(home, 'append', seed + i, `appender ${i}`));
      for (let i = 0; i < CHECKPOINTERS; i++) workers.push(start(home, 'checkpoint', seed + 100 + i, `checkpointer ${i}`));
      await Promise.all(workers.map((w) => expectLine(w, /^READY$/)));
      const failures: string[] = [];
      let stats = { events: 0, checkpoints: 0 };
      for (let r = 0; r < ROUNDS; r++) {
        for (const w of workers) w.child.stdin.write(`ROUND ${r} ${w.name.startsWith('appender') ? APPENDS_PER_ROUND : CHECKPOINTS_PER_ROUND}\n`);
        await Promise.all(workers.map((w) => expectLine(w, new RegExp(`^DONE ${r} `))));
        for (const w of workers) failures.push(...w.lines.filter((l) => l.startsWith(`FAIL ${r} `)).map((l) => `${w.name}: ${l}`));
        stats = await checkStore(home, r);
      }
      expect(failures).toEqual([]);
      // Every operation of every round happened: nothing was refused or lost.
      expect(stats.events).toBeGreaterThanOrEqual(3 + ROUNDS * APPENDERS * APPENDS_PER_ROUND);
      expect(stats.checkpoints).toBeGreaterThan(ROUNDS);
      process.stdout.write(`ledger-concurrency: ${stats.events} events, ${stats.checkpoints} checkpoints after ${ROUNDS} rounds\n`);
    } finally {
      for (const w of workers) if (w.child.exitCode === null) w.child.stdin.write('EXIT\n');
      await Promise.all(
        workers.map(
          (w) =>
            new Promise<void>((resolve) => {
              if (w.child.exitCode !== null || w.child.signalCode !== null) return resolve();
              const t = setTimeout(() => w.child.kill('SIGKILL'), 10_000);
              w.child.on('close', () => {
                clearTimeout(t);
                resolve();
              });
            }),
        ),
      );
      tmp.cleanup();
    }
  });
});
