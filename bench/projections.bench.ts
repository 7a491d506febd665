/**
 * npm run bench:projections [-- --runs R] [--repeats N]   (R sample runs of 40 events; default 2,500, i.e. about
 *                                                         100,000 events; best of N = 3 timings of each figure)
 *
 * The ledger holds R copies of the sample run (examples/ledger/sample-run.jsonl, what the run controller, the runtime
 * and the Judge write: 40 events per run, under its own run id and with its own scores) after the sample's task and
 * image events, appended through `Ledger.append` with many appends issued per turn of the event loop (group
 * commits), then a signed checkpoint. Building it is not measured.
 *
 * Prints, in one run on this machine:
 *  - the projection rebuild from an empty read-model database, `catchUp(home, store, { verify: false })` (read, parse,
 *    fold, write the read models in transactions of 1,000 events): events/s;
 *  - next to the bare read of the same rows, `home.db.events.readAll` in batches of 1,000 with `parseEnvelope` of
 *    each event (what any reader of the log does to trust an envelope), events/s; target: rebuild >= 0.5 of it. Also
 *    the plain `JSON.parse` of each envelope's bytes, for context;
 *  - for context, the whole verify-before-project rebuild (`catchUp` with `verify: true`, as the CLI and the API run
 *    it) from another empty database.
 * The rebuild and the bare read are interleaved, N times each, and the best of each is compared.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock, SequentialIds, randomIds, systemClock } from '@assay/core';
import { LedgerHome, parseEnvelope, type JsonObject, type NewEvent, initLedgerHome } from '@assay/ledger';
import { SqliteReadModelStore, catchUp } from '@assay/projections';
import { arg, fmt, now, report } from './bench-util';

const REPO = join(__dirname, '..', '..');
const SAMPLE_RUN = 'r-20261202-0001';
const SAMPLE_SCORES: Record<number, number> = { 1: 0.912, 2: 0.574, 5: 0.433 };

export type EventDraft = { stream: string; type: string; data: JsonObject };

/** The sample run's lines (examples/ledger/sample-run.jsonl): 3 task and image events, 40 of the run, 1 note. */
function sampleLines(): EventDraft[] {
  return readFileSync(join(REPO, 'examples', 'ledger', 'sample-run.jsonl'), 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as EventDraft);
}

/**
 * The sample run's 40 events under run id `run`, its three judged scores scaled by `factor` (so runs rank apart;
 * round 5 stays the best, and RunCompleted says so), as tests/projections/projection-fixtures.ts `sampleVariant`.
 */
function runEvents(template: string, run: string, factor: number): EventDraft[] {
  const events = JSON.parse(template.split(SAMPLE_RUN).join(run)) as EventDraft[];
  const score = (round: number): number => Math.round((SAMPLE_SCORES[round] as number) * factor * 1e6) / 1e6;
  for (const e of events) {
    const d = e.data as Record<string, unknown>;
    if (e.type === 'RewardRecorded') {
      const s = score(d.round as number);
      d.rewards = { ...(d.rewards as object), val_loss: s };
      d.primaryScore = s;
    }
    if (e.type === 'RunCompleted') d.bestScore = score(5);
  }
  return events;
}

/**
 * Initialises `home` and appends the sample's task and image events and `runs` sample runs (40 events each) through
 * `Ledger.append`, about `perTurn` events issued per turn of the event loop (one group commit), then signs a
 * checkpoint. Returns the number of events in the ledger.
 */
export async function buildSampleRunsHome(home: string, runs: number, origin: string, perTurn = 1000): Promise<number> {
  await initLedgerHome(home, { clock: systemClock, ids: randomIds, origin });
  const h = new LedgerHome(home, { clock: new ManualClock('2026-12-02T00:00:00.000Z', 1000), ids: new SequentialIds() });
  try {
    const lines = sampleLines();
    const template = JSON.stringify(lines.slice(3, 43));
    const appends: Array<{ stream: string; events: NewEvent[] }> = [];
    const add = (drafts: EventDraft[]): void => {
      // Consecutive events of one stream go in one append, as their writer makes them.
      for (const e of drafts) {
        const last = appends[appends.length - 1];
        if (last && last.stream === e.stream) last.events.push({ type: e.type, data: e.data });
        else appends.push({ stream: e.stream, events: [{ type: e.type, data: e.data }] });
      }
    };
    add(lines.slice(0, 3));
    for (let k = 0; k < runs; k++) add(runEvents(template, `r-bench-${String(k).padStart(6, '0')}`, 1 + (k % 997) / 1000));
    for (let i = 0; i < appends.length;) {
      const turn: Array<Promise<unknown>> = [];
      for (let n = 0; n < perTurn && i < appends.length; i++) {
        const a = appends[i] as { stream: string; events: NewEvent[] };
        turn.push(h.ledger.append(a.stream, a.events));
        n += a.events.length;
      }
      await Promise.all(turn);
    }
    await h.ledger.checkpoint();
    return await h.db.events.size();
  } finally {
    await h.close();
  }
}

async function main(): Promise<void> {
  const runs = arg('runs', 2500);
  const repeats = arg('repeats', 3);
  const dir = mkdtempSync(join(tmpdir(), 'assay-bench-projections-'));
  try {
    const home = join(dir, 'home');
    let t0 = now();
    const size = await buildSampleRunsHome(home, runs, 'assay.bench/projections');
    console.log(
      `projections benchmark: ${fmt(size)} events (${fmt(runs)} sample runs of 40 events), built and checkpointed in ${fmt(now() - t0)} ms (not measured); ` +
        `${availableParallelism()} cores, node ${process.version}`,
    );
    const h = new LedgerHome(home, { clock: systemClock, ids: randomIds });
    try {
      const target = h.db.checkpoints.latest()?.treeSize ?? 0;
      let db = 0;
      const freshStore = (): SqliteReadModelStore => new SqliteReadModelStore(join(dir, `read-models-${db++}.db`));

      /** The bare read: every row up to the checkpoint, in batches of 1,000, each envelope parsed. */
      const bareRead = async (parse: (bytes: Uint8Array) => unknown): Promise<number> => {
        const t = now();
        let n = 0;
        let sink = 0;
        for await (const batch of h.db.events.readAll({ fromPosition: 0, toPosition: target, batchSize: 1000 }))
          for (const e of batch) {
            if (parse(e.bytes) !== null) sink++;
            n++;
          }
        if (n !== target || sink !== target) throw new Error(`bare read saw ${n} events, expected ${target}`);
        return n / ((now() - t) / 1000);
      };
      const parseOne = (b: Uint8Array): unknown => parseEnvelope(b).envelope;
      const jsonOne = (b: Uint8Array): unknown => JSON.parse(Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('utf8'));

      /** The rebuild from an empty read-model database, without verification. */
      const rebuild = async (): Promise<{ rate: number; ms: number; rows: number }> => {
        const store = freshStore();
        try {
          const t = now();
          const r = await catchUp(h, store, { verify: false });
          const ms = now() - t;
          if (r.to !== target || r.from !== 0) throw new Error(`catchUp projected ${r.from}..${r.to}, expected 0..${target}`);
          return { rate: (r.to - r.from) / (ms / 1000), ms, rows: store.rowsOfTask('tiny-optimizer').length };
        } finally {
          store.close();
        }
      };

      // One untimed pass of each first (JIT, page cache), then interleaved timings.
      await bareRead(parseOne);
      const warm = await rebuild();
      if (warm.rows !== runs) throw new Error(`the leaderboard has ${warm.rows} rows, expected ${runs}`);
      const rebuilds: number[] = [];
      const bares: number[] = [];
      const jsons: number[] = [];
      for (let i = 0; i < repeats; i++) {
        bares.push(await bareRead(parseOne));
        rebuilds.push((await rebuild()).rate);
        jsons.push(await bareRead(jsonOne));
      }
      const best = (xs: number[]): number => Math.max(...xs);
      const rebuildRate = best(rebuilds);
      const bareRate = best(bares);
      const jsonRate = best(jsons);

      // For context: the whole verify-before-project rebuild, as the CLI and the API run it.
      const store = freshStore();
      t0 = now();
      const v = await catchUp(h, store, { verify: true });
      const verifiedMs = now() - t0;
      store.close();
      if (!v.verified || v.to !== target) throw new Error('the verified catch-up did not verify and project everything');

      console.log(
        `rebuild (catchUp, verify: false) from an empty database: ${rebuilds.map((r) => fmt(r)).join(', ')} events/s ` +
          `(best ${fmt((target / best(rebuilds)) * 1000)} ms for ${fmt(target)} events)`,
      );
      console.log(
        `bare readAll + parseEnvelope: ${bares.map((r) => fmt(r)).join(', ')} events/s; bare readAll + JSON.parse: ${jsons.map((r) => fmt(r)).join(', ')} events/s`,
      );
      console.log(
        `verify-before-project rebuild (catchUp, verify: true, default workers) from an empty database: ${fmt(verifiedMs)} ms = ${fmt(target / (verifiedMs / 1000))} events/s ` +
          `(${(verifiedMs / (target / rebuildRate) / 1000).toFixed(1)}x the unverified rebuild)`,
      );
      const ok = report([
        {
          name: 'projection rebuild from empty (verify: false)',
          figure: rebuildRate,
          baseline: bareRate,
          unit: 'events/s',
          target: 0.5,
          baselineName: 'readAll of the same rows + parseEnvelope',
        },
      ]);
      console.log(`for context, against readAll + JSON.parse of the bytes: ratio ${(rebuildRate / jsonRate).toFixed(3)}`);
      console.log(ok ? 'all targets met' : 'some targets NOT met');
    } finally {
      await h.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (require.main === module) void main();
