/**
 * Read-side views of runs (`assay run ls`, `assay run status`): every run in a ledger, folded from its `run-<id>`
 * stream and the Judge events about it, with nothing but the ledger (no Docker, no run directory). Pure over the
 * events; `readRunHistories` is the one scan of the log that feeds them.
 */
import type { Ledger } from '@assay/ledger';
import { isJudgeStream, JUDGE_EVENT_TYPES, recordOf, type RunEventRecord } from '../domain/run-events';
import { bestRound, foldRun, type RunState } from '../domain/run-state';
import { roundView, type RoundViewStatus } from '../domain/feedback';
import type { BudgetKind } from '../domain/run-events';

/** Every run's history (its stream + the Judge events naming it), in log order, by run id, in order of first event. */
export async function readRunHistories(ledger: Ledger): Promise<Map<string, RunEventRecord[]>> {
  const out = new Map<string, RunEventRecord[]>();
  for await (const batch of ledger.store.readAll({ fromPosition: 0, batchSize: 1000 })) {
    for (const e of batch) {
      if (e.stream.startsWith('run-')) {
        const run = e.stream.slice(4);
        const list = out.get(run) ?? [];
        list.push(recordOf(e));
        out.set(run, list);
      } else if (isJudgeStream(e.stream) && (JUDGE_EVENT_TYPES as readonly string[]).includes(e.type)) {
        const rec = recordOf(e);
        const run = typeof rec.data.run === 'string' ? rec.data.run : null;
        const list = run !== null ? out.get(run) : undefined;
        if (list) list.push(rec); // a Judge event comes after its run's RunStarted
      }
    }
  }
  return out;
}

/**
 * The events of one run stored from `fromPosition` on (its stream and the Judge events naming it), and the position
 * to read from next: what `assay watch` follows. A Judge event counts once the run's own stream has started (`known`
 * says whether it had, before this read).
 */
export async function readRunEventsFrom(
  ledger: Ledger,
  run: string,
  fromPosition: number,
  known: boolean,
): Promise<{ events: RunEventRecord[]; next: number }> {
  const events: RunEventRecord[] = [];
  let next = fromPosition;
  let started = known;
  for await (const batch of ledger.store.readAll({ fromPosition, batchSize: 1000 })) {
    for (const e of batch) {
      next = e.position + 1;
      if (e.stream === `run-${run}`) {
        started = true;
        events.push(recordOf(e));
      } else if (started && isJudgeStream(e.stream) && (JUDGE_EVENT_TYPES as readonly string[]).includes(e.type)) {
        const rec = recordOf(e);
        if (rec.data.run === run) events.push(rec);
      }
    }
  }
  return { events, next };
}

/** `interrupted`: running in the ledger, but no controller runs it here (set by the CLI, which sees the run directory). */
export type RunViewState = 'running' | 'interrupted' | 'completed' | 'no_valid_submission' | 'cancelled' | 'failed' | 'not_started' | string;

export interface RunRoundLine {
  readonly round: number;
  readonly receivedAt: string;
  readonly status: RoundViewStatus;
  /** The primary score; null for a rule violation (its forced 0 is not a score) and when none. */
  readonly score: number | null;
  readonly rule: string | null;
}

export interface RunSummary {
  readonly run: string;
  /** From the fold: `running` until RunCompleted (a dead controller's run too: `--resume` continues it), else its status. */
  readonly state: RunViewState;
  readonly task: string | null;
  readonly agent: string | null;
  readonly startedAt: string | null;
  /** RunCompleted's time, else the last event's. */
  readonly lastEventAt: string | null;
  readonly ended: boolean;
  readonly metric: string | null;
  readonly direction: 'maximize' | 'minimize' | null;
  readonly submissions: { readonly used: number; readonly allowed: number | null };
  readonly budgets: Readonly<Record<BudgetKind, { readonly used: number; readonly limit: number | null }>>;
  readonly best: { readonly round: number; readonly score: number } | null;
}

export interface RunStatusView extends RunSummary {
  /** RunStarted's task digest and protocol fingerprint (what a matched baseline must share); null before it. */
  readonly taskDigest: string | null;
  readonly fingerprint: string | null;
  readonly rounds: readonly RunRoundLine[];
  readonly refusedRequests: number;
  readonly violations: ReadonlyArray<{ readonly round: number | null; readonly rule: string }>;
  /** The GPUs of the run's latest controller session (its last GpusProbed), or null for a CPU run. */
  readonly gpus: { readonly node: string; readonly at: string; readonly gpus: readonly RunGpuLine[] } | null;
}

/** One GPU as GpusProbed recorded it (the fields a reader needs to tie a figure to hardware). */
export interface RunGpuLine {
  readonly device: string;
  readonly model: string;
  readonly memoryMiB: number | null;
  readonly driver: string;
  readonly cuda: string | null;
}

/** The last GpusProbed of a run's events, read defensively (the catalogue checked its schema when it was appended). */
export function lastProbedGpus(events: readonly RunEventRecord[]): RunStatusView['gpus'] {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i] as RunEventRecord;
    if (e.type !== 'GpusProbed') continue;
    const text = (v: unknown): string => (typeof v === 'string' ? v : '');
    const list = Array.isArray(e.data.gpus) ? (e.data.gpus as Array<Record<string, unknown>>) : [];
    return {
      node: text(e.data.node),
      at: e.time,
      gpus: list.map((g) => ({
        device: text(g.device),
        model: text(g.model),
        memoryMiB: typeof g.memoryMiB === 'number' ? g.memoryMiB : null,
        driver: text(g.driver),
        cuda: typeof g.cuda === 'string' ? g.cuda : null,
      })),
    };
  }
  return null;
}

const KINDS: readonly BudgetKind[] = ['submissions', 'wall_time', 'agent_time', 'gpu_seconds'];

export function runStatusView(run: string, events: readonly RunEventRecord[]): RunStatusView {
  const s: RunState = foldRun(run, events);
  const last = events[events.length - 1];
  const limits = s.started?.protocol.budgets as Readonly<Record<BudgetKind, number | null>> | undefined;
  // wall time used: recorded, or (while running) never less than the time from RunStarted to the last event
  const used = (k: BudgetKind): number => {
    if (k !== 'wall_time' || !s.started) return s.consumed[k];
    const end = s.completed?.at ?? last?.time;
    const elapsed = end ? Math.max(0, (Date.parse(end) - Date.parse(s.started.startedAt)) / 1000) : 0;
    return Math.max(s.consumed[k], Math.floor(elapsed));
  };
  const budgets = Object.fromEntries(KINDS.map((k) => [k, { used: used(k), limit: limits?.[k] ?? null }])) as RunSummary['budgets'];
  const best = bestRound(s);
  return {
    run,
    state: !s.started ? 'not_started' : s.completed ? s.completed.status : 'running',
    task: s.started?.task ?? null,
    agent: s.started?.agent ?? null,
    startedAt: s.started?.startedAt ?? null,
    lastEventAt: s.completed?.at ?? last?.time ?? null,
    ended: s.completed !== null,
    metric: s.started?.selection.metric ?? null,
    direction: s.started?.selection.direction ?? null,
    submissions: { used: s.consumed.submissions, allowed: limits?.submissions ?? null },
    budgets,
    best: best ? { round: best.round, score: best.score } : null,
    taskDigest: s.started?.taskDigest ?? null,
    fingerprint: s.started?.fingerprint ?? null,
    rounds: s.rounds.map((r) => {
      const v = roundView(s, r);
      return { round: v.round, receivedAt: v.receivedAt, status: v.status, score: v.status === 'rule_violation' ? null : v.score, rule: v.rule };
    }),
    refusedRequests: s.rejections,
    violations: s.violations.map((v) => ({ round: v.round, rule: v.rule })),
    gpus: lastProbedGpus(events),
  };
}

export function runSummary(v: RunStatusView): RunSummary {
  const { rounds: _r, refusedRequests: _q, violations: _v, taskDigest: _d, fingerprint: _f, gpus: _g, ...rest } = v;
  return rest;
}
