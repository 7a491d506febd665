/**
 * The genuine ledger homes of the mutation drill (tests/ledger/ledger-mutation-drill.int.spec.ts), and the ways the
 * drill looks at a home: the verdict of `assay ledger verify` (in-process, through the CLI's own entry, or the built
 * CLI in a child process) and what SQLite itself makes of the files (an oracle independent of Assay's verifier).
 *
 * Every home is deterministic: keys from a seeded random source, a manual clock, sequential ids. Runs are written by
 * the real run controller (SubmissionService over LedgerRunLedger, with the scripted Judge), so their histories
 * follow the run's own rules.
 */
import { spawn } from 'node:child_process';
import { chmodSync, copyFileSync, cpSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { ManualClock, SequentialIds, silentProgress } from '@assay/core';
import { LedgerHome, generateKeyPair, homePaths, writeKeyPair, type JsonObject, type Role, initLedgerHome } from '@assay/ledger';
import { FakeJudge, FakeSnapshotter, LedgerRunLedger, SubmissionService, type BudgetKind, type FakeJudgeBehaviour } from '@assay/run';
import { runCli } from '../../apps/cli/src/main';
import type { CliContext } from '../../apps/cli/src/cli-context';
import { BEARER, startInput } from '../run/support/run-fixtures';
import { REPO_ROOT, TS_REGISTER, finished } from './child-process';
import { prng } from './prng';
import { sampleEvents } from './ledger-home-fixtures';

export const DRILL_ORIGIN = 'assay.test/mutation-drill';

/** A seeded stand-in for crypto.randomBytes (key generation). */
export function seededBytes(seed: number): (n: number) => Buffer {
  const r = prng(seed);
  return (n: number) => Buffer.from(Array.from({ length: n }, () => Math.floor(r() * 256)));
}

/** Writes controller, runtime and judge keys (deterministic) into `<home>/keys`, so `init` uses them. */
export function writeSeededKeys(home: string, seed: number): void {
  const dir = homePaths(home).keys;
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  const random = seededBytes(seed);
  for (const role of ['controller', 'runtime', 'judge'] as Role[]) writeKeyPair(dir, generateKeyPair(role, undefined, random));
}

let writers = 0;
/** A clock and an id range of their own for each writer, so no two writers ever reuse an id. */
export function drillDeps(start = '2026-12-01T10:00:00.000Z'): { clock: ManualClock; ids: SequentialIds } {
  writers += 1;
  return { clock: new ManualClock(start, 250), ids: new SequentialIds(`${writers.toString(16).padStart(8, '0')}-0000-4000-9000`) };
}

export interface RunFacts {
  run: string;
  stream: string;
  completed: boolean;
  direction: 'maximize' | 'minimize';
  /** Best round and score as the controller recorded them (RunCompleted), or as it would record them now. */
  bestRound: number | null;
  bestScore: number | null;
  bestSnapshot: string | null;
  /** Rounds and their state after the last event (from the run's own fold). */
  rounds: Array<{ round: number; outcome: string; score: number | null; snapshot: string | null; violation: boolean; judgeStatus: string | null }>;
  /** Budgets of the run (from RunStarted), and what was used of each. */
  budgets: Record<BudgetKind, number | null>;
  consumed: Record<BudgetKind, number>;
}

export interface Stage {
  name: string;
  /** Copy of ledger.db taken with every connection closed (no -wal). */
  db: string;
  /** checkpoint.last at that moment. */
  witness: string;
  events: number;
  witnessSize: number;
}

export interface DrillHomes {
  /** The genuine home: runs, filler, four checkpoints after init's, and a tail of events no checkpoint covers. */
  home: string;
  events: number;
  /** Size of the last signed checkpoint (checkpoint.last); events at and after it are the uncovered tail. */
  witnessSize: number;
  checkpointSizes: number[];
  stages: Stage[];
  runs: Record<'a' | 'b' | 'c', RunFacts>;
  /**
   * The same ledger, copied while a writer was open and a reader held an old snapshot: ledger.db holds `home`,
   * ledger.db-wal holds a further run, a signed checkpoint covering it, and a short uncovered tail.
   */
  walHome: string;
  walEvents: number;
  walWitnessSize: number;
  runD: RunFacts;
}

const note = (text: string) => ({ type: 'Note', data: { text } as JsonObject });

async function filler(h: LedgerHome, tag: string, n: number, r: () => number): Promise<void> {
  const streams = ['note-ops', 'note-audit', `note-${tag}`];
  for (let i = 0; i < n; i++) {
    const stream = streams[Math.floor(r() * streams.length)] as string;
    // Mostly one event an append (one transaction each), sometimes a batch.
    const k = r() < 0.2 ? 2 + Math.floor(r() * 3) : 1;
    await h.ledger.append(
      stream,
      Array.from({ length: k }, (_, j) => note(`${tag} note ${i}.${j}: ${Math.floor(r() * 1e9).toString(36)}`)),
    );
    i += k - 1;
  }
}

function runFacts(svc: SubmissionService, direction: 'maximize' | 'minimize'): RunFacts {
  const s = svc.current;
  const done = s.completed as { status: string; bestRound: number | null; bestScore: number | null; bestSnapshot: string | null } | null;
  const started = s.started as unknown as { protocol: { budgets: Record<BudgetKind, number | null> } };
  return {
    run: s.run,
    stream: `run-${s.run}`,
    completed: done !== null,
    direction,
    bestRound: done ? done.bestRound : null,
    bestScore: done ? done.bestScore : null,
    bestSnapshot: done ? done.bestSnapshot : null,
    rounds: s.rounds.map((x) => {
      const rewards = x.rewards as Record<string, number> | null;
      const score = rewards ? (rewards.reward ?? rewards.val_loss ?? null) : null;
      return {
        round: x.round,
        outcome: x.outcome,
        score,
        snapshot: x.snapshot?.root ?? null,
        violation: x.violation !== null,
        judgeStatus: x.judge?.status ?? null,
      };
    }),
    budgets: { ...started.protocol.budgets },
    consumed: { ...s.consumed },
  };
}

interface RunPlan {
  run: string;
  settings: Parameters<typeof startInput>[1];
  direction: 'maximize' | 'minimize';
  script: FakeJudgeBehaviour[];
  /** Per round: files to set before submitting (the workspace). */
  edits: Array<Record<string, string | null>>;
  /** Called after the given round (1-based) was submitted. */
  after?: Record<number, (svc: SubmissionService) => Promise<void>>;
  extraSubmits?: number;
  complete: boolean;
}

/** The workspace every drill run starts from. */
export const BASELINE_FILES: Readonly<Record<string, string>> = { 'solve.py': 'print(0)\n', 'README.md': 'the task\n' };

/** The scripted Judge, writing through the run's ledger; its Judges (and their streams) are named `<prefix>-fake-<n>-r<round>`. */
function scriptedJudge(rl: LedgerRunLedger, prefix: string, script: FakeJudgeBehaviour[], ids: SequentialIds): FakeJudge {
  const own = (j: unknown) => `${prefix}-${String(j)}`;
  return new FakeJudge(
    (s, e, x) =>
      rl.appendTo(
        s.replace(/^judge-/, `judge-${prefix}-`),
        e.map((ev) => ('judge' in ev.data ? { ...ev, data: { ...ev.data, judge: own(ev.data.judge) } } : ev)),
        x,
      ),
    ids,
    script,
  );
}

/**
 * Continues a run already in the ledger with the real controller (after a restart): more rounds, a budget use, and
 * RunCompleted when asked. What it writes is what a correct controller writes.
 */
export async function continueRun(
  h: LedgerHome,
  o: {
    run: string;
    judgePrefix: string;
    script: FakeJudgeBehaviour[];
    edits: Array<Record<string, string>>;
    consume?: { budget: 'agent_time' | 'wall_time'; amount: number };
    complete: boolean;
  },
): Promise<RunFacts> {
  const deps = drillDeps('2026-12-05T10:00:00.000Z');
  const rl = new LedgerRunLedger(h.ledger);
  const snap = new FakeSnapshotter({ ...BASELINE_FILES });
  await snap.snapshot({ run: o.run, round: null }); // knows the baseline tree again
  const judge = scriptedJudge(rl, o.judgePrefix, o.script, deps.ids);
  const svc = await new SubmissionService({ run: o.run, ledger: rl, snapshotter: snap, judge, clock: deps.clock, ids: deps.ids }).load();
  for (const edit of o.edits) {
    for (const [k, v] of Object.entries(edit)) snap.files.set(k, v);
    await svc.submit({ authorization: BEARER, hasBody: false, hasQuery: false });
  }
  if (o.consume) await svc.consume(o.consume.budget, o.consume.amount);
  if (o.complete) await svc.complete();
  return runFacts(svc, 'maximize');
}

/** A new run started and completed by the real controller with no submission (RunCompleted no_valid_submission). */
export async function startAndComplete(h: LedgerHome, run: string): Promise<RunFacts> {
  const deps = drillDeps('2026-12-05T10:00:00.000Z');
  const rl = new LedgerRunLedger(h.ledger);
  const snap = new FakeSnapshotter({ ...BASELINE_FILES });
  const svc = await new SubmissionService({
    run,
    ledger: rl,
    snapshotter: snap,
    judge: scriptedJudge(rl, run, [], deps.ids),
    clock: deps.clock,
    ids: deps.ids,
  }).start(startInput(run, {}));
  await svc.complete();
  return runFacts(svc, 'maximize');
}

/** A run written by the real controller: RunStarted, WorkStarted, a baseline snapshot, rounds, budgets, RunCompleted. */
async function playRun(h: LedgerHome, plan: RunPlan, deps: { clock: ManualClock; ids: SequentialIds }): Promise<RunFacts> {
  const rl = new LedgerRunLedger(h.ledger);
  const snap = new FakeSnapshotter({ ...BASELINE_FILES });
  const judge = scriptedJudge(rl, plan.run, plan.script, deps.ids);
  const svc = await new SubmissionService({ run: plan.run, ledger: rl, snapshotter: snap, judge, clock: deps.clock, ids: deps.ids }).start(
    startInput(plan.run, plan.settings),
  );
  await svc.workStarted(`assay-work-${plan.run}`, `sha256:${'7'.repeat(64)}`, { cpus: 2, memoryMb: 4096 });
  await svc.recordWorkspace();
  for (const [i, edit] of plan.edits.entries()) {
    for (const [k, v] of Object.entries(edit)) {
      if (v === null) snap.files.delete(k);
      else snap.files.set(k, v);
    }
    const reply = await svc.submit({ authorization: BEARER, hasBody: false, hasQuery: false });
    if (reply.httpStatus >= 500 && reply.code !== 'SUBMIT_REFUNDED') throw new Error(`round ${i + 1}: ${reply.text}`);
    await plan.after?.[i + 1]?.(svc);
  }
  for (let i = 0; i < (plan.extraSubmits ?? 0); i++) await svc.submit({ authorization: BEARER, hasBody: false, hasQuery: false });
  // A refused request without a token (recorded, no round).
  await svc.submit({ authorization: undefined, hasBody: false, hasQuery: false });
  if (plan.complete) await svc.complete();
  return runFacts(svc, plan.direction);
}

function closedCopy(home: string, to: string): void {
  copyFileSync(homePaths(home).db, to);
}

/** Builds the drill's genuine homes under `base`. */
export async function buildDrillHomes(base: string, seed = 20261202): Promise<DrillHomes> {
  const r = prng(seed);
  const home = join(base, 'genuine');
  const stagesDir = join(base, 'stages');
  mkdirSync(stagesDir, { recursive: true });
  writeSeededKeys(home, seed);
  const d = drillDeps();
  await initLedgerHome(home, { ...d, origin: DRILL_ORIGIN });
  const stages: Stage[] = [];
  const checkpointSizes: number[] = [];
  const p = homePaths(home);
  const stage = async (name: string, events: number, witnessSize: number) => {
    const db = join(stagesDir, `${name}.db`);
    const witness = join(stagesDir, `${name}.checkpoint.last`);
    closedCopy(home, db);
    copyFileSync(p.witness, witness);
    stages.push({ name, db, witness, events, witnessSize });
  };
  const withHome = async <T>(fn: (h: LedgerHome) => Promise<T>): Promise<T> => {
    const h = new LedgerHome(home, d);
    try {
      return await fn(h);
    } finally {
      await h.close();
    }
  };
  const checkpoint = async (h: LedgerHome): Promise<number> => {
    const cp = await h.ledger.checkpoint();
    checkpointSizes.push(cp.treeSize);
    return cp.treeSize;
  };
  // init signed one at size 3
  checkpointSizes.push(3);

  let size = await withHome(async (h) => {
    for (const e of sampleEvents().filter((x) => ['TaskRegistered', 'ImageBuilt'].includes(x.type)))
      await h.ledger.append(e.stream, [{ type: e.type, data: e.data }]);
    await filler(h, 's0', 40, r);
    return checkpoint(h);
  });
  await stage('s0', size, size);

  const runs = {} as Record<'a' | 'b' | 'c', RunFacts>;
  size = await withHome(async (h) => {
    // Run a: maximize `reward`; a RuleViolation round (the Judge refuses the submission), a refunded round
    // (infrastructure), a verifier error; the best round is not the last one.
    runs.a = await playRun(
      h,
      {
        run: 'drill-a',
        settings: { settings: { maxSubmissions: 8 } },
        direction: 'maximize',
        script: [
          { status: 'completed', rewards: { reward: 0.31 } },
          { status: 'completed', rewards: { reward: 0.72 } },
          { status: 'submission_error', detail: 'tests/ was edited' },
          { status: 'completed', rewards: { reward: 0.55 } },
          { status: 'infrastructure_error', detail: 'docker went away' },
          { status: 'verifier_error', detail: 'no reward.json' },
          { status: 'completed', rewards: { reward: 0.69 } },
        ],
        edits: [1, 2, 3, 4, 5, 6, 7].map((i) => ({ 'solve.py': `print(${i})\n` })),
        after: { 2: (svc) => svc.consume('agent_time', 41.5) },
        complete: true,
      },
      d,
    );
    await filler(h, 's1', 10, r);
    return checkpoint(h);
  });
  await stage('s1', size, size);

  size = await withHome(async (h) => {
    // Run b: minimize `val_loss` with a submission budget of 3 and a GPU budget of 20 s; Work's GPU use goes over it
    // (RuleViolation budget.gpu_seconds closes submissions); later requests are refused (429, recorded).
    runs.b = await playRun(
      h,
      {
        run: 'drill-b',
        settings: { settings: { maxSubmissions: 3, primaryMetric: 'val_loss', direction: 'minimize', gpuBudgetSec: 20 } },
        direction: 'minimize',
        script: [
          { status: 'completed', rewards: { val_loss: 2.5 } },
          { status: 'completed', rewards: { val_loss: 1.25 }, gpuSeconds: 6 },
          { status: 'completed', rewards: { val_loss: 1.75 } },
        ],
        edits: [1, 2].map((i) => ({ 'solve.py': `print(${i})\n` })),
        after: { 2: (svc) => svc.consume('gpu_seconds', 15, null, { holder: 'work', devices: ['0'], heldSec: 15 }) },
        extraSubmits: 2,
        complete: true,
      },
      d,
    );
    await filler(h, 's2', 30, r);
    return checkpoint(h);
  });
  await stage('s2', size, size);

  size = await withHome(async (h) => {
    // Run c: still running (no RunCompleted); a round that edits a path outside the editable ones.
    runs.c = await playRun(
      h,
      {
        run: 'drill-c',
        settings: { settings: { maxSubmissions: 10 }, editablePaths: ['solve.py'], agentTimeoutSec: 600 },
        direction: 'maximize',
        script: [
          { status: 'completed', rewards: { reward: 0.4 } },
          { status: 'completed', rewards: { reward: 0.9 } },
          { status: 'completed', rewards: { reward: 0.65 } },
          { status: 'completed', rewards: { reward: 0.5 } },
        ],
        edits: [
          { 'solve.py': 'print(1)\n' },
          { 'README.md': 'edited\n' },
          { 'README.md': 'the task\n', 'solve.py': 'print(3)\n' },
          { 'solve.py': 'print(4)\n' },
        ],
        after: { 1: (svc) => svc.consume('agent_time', 120) },
        complete: false,
      },
      d,
    );
    await filler(h, 's3', 30, r);
    return checkpoint(h);
  });
  await stage('s3', size, size);
  const witnessSize = size;

  // The uncovered tail: events no checkpoint signs yet.
  const events = await withHome(async (h) => {
    for (let i = 0; i < 5; i++) await h.ledger.append('note-tail', [note(`tail ${i}`)]);
    return h.db.events.size();
  });

  // The WAL home: a reader holds a snapshot of `home` so nothing is checkpointed into ledger.db while a writer
  // adds run d, signs a checkpoint and appends a tail; the files are copied while both connections are open.
  const walSrc = join(base, 'wal-src');
  cpSync(home, walSrc, { recursive: true });
  const walHome = join(base, 'genuine-wal');
  const reader = new Database(homePaths(walSrc).db);
  reader.pragma('journal_mode = WAL');
  reader.prepare('BEGIN').run();
  reader.prepare('SELECT count(*) FROM events').get();
  let runD: RunFacts;
  let walWitnessSize = 0;
  let walEvents = 0;
  const h = new LedgerHome(walSrc, d);
  try {
    runD = await playRun(
      h,
      {
        run: 'drill-d',
        settings: { settings: { maxSubmissions: 5 } },
        direction: 'maximize',
        script: [
          { status: 'completed', rewards: { reward: 0.2 } },
          { status: 'completed', rewards: { reward: 0.8 } },
          { status: 'completed', rewards: { reward: 0.6 } },
        ],
        edits: [1, 2, 3].map((i) => ({ 'solve.py': `print(${i})\n` })),
        complete: true,
      },
      d,
    );
    await filler(h, 'w', 12, r);
    walWitnessSize = (await h.ledger.checkpoint()).treeSize;
    for (let i = 0; i < 3; i++) await h.ledger.append('note-waltail', [note(`wal tail ${i}`)]);
    walEvents = await h.db.events.size();
    mkdirSync(walHome, { recursive: true });
    for (const f of readdirSync(walSrc)) if (f !== 'ledger') cpSync(join(walSrc, f), join(walHome, f), { recursive: true });
    const from = homePaths(walSrc);
    const to = homePaths(walHome);
    mkdirSync(to.ledgerDir, { recursive: true });
    for (const f of ['ledger.json', 'checkpoint.last', 'ledger.db', 'ledger.db-wal']) copyFileSync(join(from.ledgerDir, f), join(to.ledgerDir, f));
  } finally {
    await h.close();
    reader.prepare('COMMIT').run();
    reader.close();
  }
  const walBytes = statSync(join(homePaths(walHome).ledgerDir, 'ledger.db-wal')).size;
  if (walBytes < 4096) throw new Error(`the WAL home's ledger.db-wal holds ${walBytes} bytes: the writes were checkpointed away`);
  return { home, events, witnessSize, checkpointSizes, stages, runs, walHome, walEvents, walWitnessSize, runD: runD! };
}

/** A fresh copy of a home (keys keep their modes). */
export function copyHome(from: string, to: string): void {
  cpSync(from, to, { recursive: true });
}

// ---- what SQLite makes of the files (the oracle) ---------------------------------------------------------------------

export interface SqliteFacts {
  events: number;
  maxPosition: number | null;
  checkpointRows: number;
  maxCheckpointSize: number | null;
  /** SHA-256 over the schema, schema_version, events, merkle_nodes and checkpoints: what a reader would see. */
  digest: string;
  /** PRAGMA integrity_check (when asked for): 'ok', or its first problem. */
  integrity: string;
}

/**
 * Opens a scratch copy of a home's database files (ledger.db and, when present, ledger.db-wal) with plain SQLite
 * and reports what it holds; null when SQLite cannot read it. The home itself is never opened, so nothing (not
 * even WAL recovery or a checkpoint at close) changes what the verifier under test will see.
 */
export function sqliteFacts(home: string, scratch: string, o: { integrity?: boolean } = {}): SqliteFacts | null {
  const p = homePaths(home);
  rmSync(scratch, { recursive: true, force: true });
  mkdirSync(scratch, { recursive: true });
  const db = join(scratch, 'ledger.db');
  if (!existsSync(p.db)) return null;
  copyFileSync(p.db, db);
  if (existsSync(`${p.db}-wal`)) copyFileSync(`${p.db}-wal`, `${db}-wal`);
  let conn: Database.Database | null = null;
  try {
    conn = new Database(db);
    const h = createHash('sha256');
    const dump = (sql: string) => {
      for (const row of conn!.prepare(sql).raw().iterate() as Iterable<unknown[]>)
        h.update(JSON.stringify(row.map((v) => (Buffer.isBuffer(v) ? `b:${v.toString('hex')}` : v === null ? null : `${typeof v}:${String(v)}`))));
      h.update('|');
    };
    dump("SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_stat%' ORDER BY type, name");
    const tables = new Set(conn.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").pluck().all() as string[]);
    if (tables.has('schema_version')) dump('SELECT version, name, sha256 FROM schema_version ORDER BY rowid');
    if (tables.has('events')) dump('SELECT * FROM events ORDER BY rowid');
    if (tables.has('merkle_nodes')) dump('SELECT * FROM merkle_nodes ORDER BY level, idx');
    if (tables.has('checkpoints')) dump('SELECT * FROM checkpoints ORDER BY rowid');
    const ev = tables.has('events')
      ? (conn.prepare('SELECT count(*) AS n, max(position) AS m FROM events').get() as { n: number; m: number | null })
      : { n: 0, m: null };
    const cp = tables.has('checkpoints')
      ? (conn.prepare('SELECT count(*) AS n, max(tree_size) AS m FROM checkpoints').get() as { n: number; m: number | null })
      : { n: 0, m: null };
    const integrity = o.integrity ? String(conn.pragma('integrity_check', { simple: true })) : 'not checked';
    return { events: ev.n, maxPosition: ev.m, checkpointRows: cp.n, maxCheckpointSize: cp.m, digest: h.digest('hex'), integrity };
  } catch {
    return null;
  } finally {
    try {
      conn?.close();
    } catch {
      // unreadable
    }
    rmSync(scratch, { recursive: true, force: true });
  }
}

// ---- the verdict of `assay ledger verify` --------------------------------------------------------------------------

export interface Outcome {
  /** The process exit code `assay ledger verify` has (0 verified, 5 integrity, 2/3/6/7 other errors, 70 internal). */
  exit: number;
  /** From the report (exit 5 with a report) */
  step?: string;
  /** From the report's failure, or from `assay: error CODE: ...`. */
  code?: string;
  message: string;
  /** The report's `claims` (the rule set the claims step used; null when it did not run). */
  claims?: string | null;
}

function outcomeOf(exit: number, stdout: string, stderr: string): Outcome {
  interface Report {
    ok?: boolean;
    events?: number;
    failure?: { step: string; code: string; message: string } | null;
    claims?: string | null;
  }
  let report: Report | null;
  try {
    report = stdout.trim() ? (JSON.parse(stdout) as Report) : null;
  } catch {
    report = null;
  }
  const m = /assay: (?:error ([A-Z0-9_]+): |internal error: )([^\n]*)/.exec(stderr);
  const out: Outcome = { exit, message: '' };
  if (report && report.ok === true && !report.failure) out.message = `verified (${String(report.events)} events)`;
  else if (report?.failure) {
    out.step = report.failure.step;
    out.code = report.failure.code;
    out.message = report.failure.message;
  } else if (m) {
    if (m[1]) out.code = m[1];
    out.message = (m[2] ?? '').slice(0, 300);
  } else out.message = (stderr || stdout).trim().split('\n').slice(0, 3).join(' | ').slice(0, 300);
  if (report && 'claims' in report) out.claims = report.claims ?? null;
  return out;
}

/**
 * `assay ledger verify --json --workers 0` in this process, through the CLI's own entry (runCli: the Nest query,
 * the handler, LedgerHome, and the CLI's mapping of errors to exit codes: an AssayError's kind, 70 for anything else).
 */
export async function verifyInProcess(home: string, extra: string[] = []): Promise<Outcome> {
  let stdout = '';
  let stderr = '';
  const ctx: CliContext = {
    home,
    out: (t) => void (stdout += t.endsWith('\n') ? t : `${t}\n`),
    err: (t) => void (stderr += t.endsWith('\n') ? t : `${t}\n`),
    progress: () => silentProgress,
  };
  const before = process.exitCode;
  process.exitCode = undefined;
  let exit: number;
  try {
    exit = await runCli(['ledger', 'verify', '--json', '--workers', '0', ...extra], ctx);
  } catch (e) {
    // runCli maps every error itself; an escape is a crash all the same.
    exit = 70;
    stderr += `assay: internal error: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`;
  } finally {
    process.exitCode = before;
  }
  return outcomeOf(exit, stdout, stderr);
}

const BUILT_MAIN = join(REPO_ROOT, 'dist', 'apps', 'cli', 'src', 'main.js');

function newestSource(dir: string): number {
  let newest = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) {
      if (e.name !== 'node_modules' && e.name !== 'native') newest = Math.max(newest, newestSource(p));
    } else if (e.name.endsWith('.ts') && !e.name.endsWith('.spec.ts')) newest = Math.max(newest, statSync(p).mtimeMs);
  }
  return newest;
}

/**
 * How the child-process checks run `assay`: the built CLI (`node bin/assay.js`, what users run and what CI tests,
 * since it builds first) when dist/ is at least as new as every source file it is built from; otherwise the same
 * program from its TypeScript sources (a stale dist/ would check yesterday's verifier).
 */
export function cliCommand(): { how: string; argv: string[] } {
  const built = existsSync(BUILT_MAIN) ? statSync(BUILT_MAIN).mtimeMs : 0;
  const sources = Math.max(newestSource(join(REPO_ROOT, 'apps')), newestSource(join(REPO_ROOT, 'libs')));
  if (built >= sources) return { how: 'the built CLI, node bin/assay.js', argv: [join(REPO_ROOT, 'bin', 'assay.js')] };
  return {
    how: `the CLI from its sources (dist/ is ${built ? 'older than the sources' : 'missing'}; run npm run build to check the built one)`,
    argv: ['-r', TS_REGISTER, join(REPO_ROOT, 'apps', 'cli', 'src', 'main.ts')],
  };
}

/** `assay ledger verify --json` in a child process with ASSAY_HOME set (see cliCommand for which `assay`). */
export async function verifyInChild(home: string, extra: string[] = [], argv = cliCommand().argv): Promise<Outcome> {
  const child = spawn(process.execPath, [...argv, 'ledger', 'verify', '--json', ...extra], {
    cwd: REPO_ROOT,
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, NODE_OPTIONS: '', ASSAY_HOME: home },
  });
  child.stdin.end();
  const r = await finished(child, 120_000);
  return outcomeOf(r.code ?? 70, r.stdout, r.stderr);
}

/** A file's bytes; null when there is no file (or something else, e.g. a directory, stands there). */
export const fileBytes = (path: string): Buffer | null => (existsSync(path) && statSync(path).isFile() ? readFileSync(path) : null);
