/**
 * Runs for the projection tests, derived from the sample run (examples/ledger/sample-run.jsonl, what the run
 * controller writes): the same events under another run id, protocol fingerprint, scores or direction, and a run
 * without a valid submission. As ledger events (to append with the ledger's own append) or as event records (data).
 */
import { LedgerHome, type JsonObject, initLedgerHome } from '@assay/ledger';
import { baselineEventData, baselineStream, type RunEventRecord } from '@assay/run';
import { deps, sampleEvents } from '../support/ledger-home-fixtures';
import { SAMPLE_JUDGE_LIMITS } from '../support/sample-run';
import { EMPTY_OUTPUT_DIGEST, judgeCompletedData, judgeLaunchedData, rewardRecordedData } from '@assay/judge';

export type EventDraft = { stream: string; type: string; data: JsonObject };

const SAMPLE_RUN = 'r-20261202-0001';
const SAMPLE_FP = 'sha256:5aef96240bca5582e6fd0468879a26863d81d1c1fb602def55926ef33ec8bb1f';

/** Task and image events of the sample (once per ledger). */
export const preamble = (): EventDraft[] => sampleEvents().slice(0, 3);

export interface Variant {
  run: string;
  fingerprint?: string;
  /** Primary scores of rounds 1, 2 and 5 (the judged ones; the sample's: 0.912, 0.574, 0.433). */
  scores?: [number, number, number];
  direction?: 'maximize' | 'minimize';
  /** Keep RunCompleted (default true; its best follows the scores and direction). */
  complete?: boolean;
}

/** The sample run's events, varied. */
export function sampleVariant(v: Variant): EventDraft[] {
  const scores = v.scores ?? [0.912, 0.574, 0.433];
  const direction = v.direction ?? 'minimize';
  let text = JSON.stringify(sampleEvents().slice(3, 43));
  text = text
    .split(SAMPLE_RUN)
    .join(v.run)
    .split(SAMPLE_FP)
    .join(v.fingerprint ?? SAMPLE_FP);
  const events = JSON.parse(text) as EventDraft[];
  const byRound: Record<number, number> = { 1: scores[0], 2: scores[1], 5: scores[2] };
  const out: EventDraft[] = [];
  for (const e of events) {
    const d = e.data as Record<string, unknown>;
    if (e.type === 'RunStarted') (d.selection as Record<string, unknown>).direction = direction;
    if (e.type === 'RewardRecorded') {
      const s = byRound[d.round as number]!;
      d.rewards = { ...(d.rewards as object), val_loss: s };
      d.primaryScore = s;
    }
    if (e.type === 'RunCompleted') {
      if (v.complete === false) continue;
      const cands = [1, 2, 5].map((r) => ({ round: r, score: byRound[r]! }));
      let best = cands[0]!;
      for (const c of cands) if (direction === 'maximize' ? c.score > best.score : c.score < best.score) best = c;
      const snap = events.find((x) => x.type === 'SnapshotTaken' && (x.data as { round?: number }).round === best.round)!;
      d.bestRound = best.round;
      d.bestScore = best.score;
      d.bestSnapshot = (snap.data as { root: string }).root;
    }
    out.push(e);
  }
  return out;
}

/** A run whose only submission broke a rule: no valid submission, RunCompleted `no_valid_submission`. */
export function noValidRun(run: string, fingerprint = SAMPLE_FP): EventDraft[] {
  const all = sampleVariant({ run, fingerprint });
  const keep = all.slice(0, 3); // RunStarted, WorkStarted, the baseline SnapshotTaken
  const root = 'bafyreib52zenvtzr2g4sc5oraqoybike6ypbty5inlgjuafv2ljwqq7fpq';
  const s = `run-${run}`;
  return [
    ...keep,
    { stream: s, type: 'SubmissionReceived', data: { run, round: 1 } },
    {
      stream: s,
      type: 'SnapshotTaken',
      data: {
        run,
        root,
        files: 4,
        bytes: 253,
        durationMs: 12,
        policyDigest: (keep[2]!.data as { policyDigest: string }).policyDigest,
        round: 1,
        source: '/workspace',
      },
    },
    { stream: s, type: 'RuleViolation', data: { run, rule: 'workspace.not_editable', detail: 'added "numpy.py"', score: 0, round: 1 } },
    { stream: s, type: 'BudgetConsumed', data: { run, budget: 'submissions', amount: 1, remaining: 3, round: 1 } },
    { stream: s, type: 'RunCompleted', data: { run, status: 'no_valid_submission', bestRound: null, bestScore: null, bestSnapshot: null } },
  ];
}

/** Events as records (what the projections fold): positions from `from`, one second apart from `t0`. */
export function asRecords(events: readonly EventDraft[], from = 0, t0 = Date.parse('2026-12-01T10:00:00.000Z')): RunEventRecord[] {
  const revisions = new Map<string, number>();
  return events.map((e, i) => {
    const revision = (revisions.get(e.stream) ?? -1) + 1;
    revisions.set(e.stream, revision);
    return {
      position: from + i,
      stream: e.stream,
      revision,
      id: `00000000-0000-4000-8000-${String(from + i).padStart(12, '0')}`,
      type: e.type,
      time: new Date(t0 + (from + i) * 1000).toISOString(),
      data: e.data,
    };
  });
}

/** An initialised home with `events` appended through the ledger's own append, then a signed checkpoint. */
export async function homeWith(home: string, events: readonly EventDraft[], opts: { checkpoint?: boolean } = {}): Promise<number> {
  await initLedgerHome(home, { ...deps(), origin: 'assay.test/ledger' });
  return appendTo(home, events, opts);
}

export async function appendTo(home: string, events: readonly EventDraft[], opts: { checkpoint?: boolean } = {}): Promise<number> {
  const h = new LedgerHome(home, deps());
  try {
    for (const e of events) await h.ledger.append(e.stream, [{ type: e.type, data: e.data }]);
    if (opts.checkpoint !== false) await h.ledger.checkpoint();
    return await h.db.events.size();
  } finally {
    await h.close();
  }
}

const BASELINE_SNAPSHOT = 'bafyreib52zenvtzr2g4sc5oraqoybike6ypbty5inlgjuafv2ljwqq7fpq';
const SAMPLE_JUDGE_IMAGE = 'sha256:b29814cf5792e684cd75d6a7fce7a67a11887e312f87ca2ac2496d81f365ff72';
export interface BaselineFixture {
  kind: 'start' | 'oracle';
  scores: Array<number | null>;
  fingerprint?: string;
  direction?: 'maximize' | 'minimize';
  /** The Judges' ids, one per score (default: made up; `baselineEvents` records them). */
  judges?: string[];
  taskDigest?: string;
}

/** A BaselineRecorded of the sample's task (`assay baseline`'s event): its repeats' scores under a fingerprint. */
export function baselineDraft(o: BaselineFixture): EventDraft {
  const taskDigest = o.taskDigest ?? (sampleEvents()[0]!.data as { digest: string }).digest;
  return {
    stream: baselineStream('tiny-optimizer'),
    type: 'BaselineRecorded',
    data: baselineEventData({
      task: 'tiny-optimizer',
      taskDigest,
      protocolFingerprint: o.fingerprint ?? SAMPLE_FP,
      fingerprintInput: { scheme: 'assay.protocol-fingerprint/1', taskDigest },
      metric: 'val_loss',
      direction: o.direction ?? 'minimize',
      kind: o.kind,
      snapshot: BASELINE_SNAPSHOT,
      judgeImageDigest: SAMPLE_JUDGE_IMAGE,
      scores: o.scores.map((s, i) => ({
        judge: o.judges?.[i] ?? `00000000-0000-4000-8000-${String(900 + i).padStart(12, '0')}`,
        status: s === null ? 'verifier_error' : 'completed',
        primaryScore: s,
      })),
    }),
  };
}

let baselineJudges = 0;
/**
 * A baseline as `assay baseline` records it: one standalone Judge per repeat (JudgeLaunched on the baseline's
 * snapshot with the sample's Judge image, JudgeCompleted, RewardRecorded for a completed one), then the
 * BaselineRecorded citing them, so that the claims step of `assay ledger verify` accepts it.
 */
export function baselineEvents(o: BaselineFixture): EventDraft[] {
  const judges = o.scores.map(() => `bl-${++baselineJudges}`);
  const out: EventDraft[] = [];
  o.scores.forEach((score, i) => {
    const judge = judges[i]!;
    const stream = `judge-${judge}`;
    out.push({
      stream,
      type: 'JudgeLaunched',
      data: judgeLaunchedData({
        judge,
        image: SAMPLE_JUDGE_IMAGE,
        snapshot: BASELINE_SNAPSHOT,
        testsDigest: `sha256:${'5'.repeat(64)}`,
        limits: SAMPLE_JUDGE_LIMITS,
        network: 'none',
      }) as JsonObject,
    });
    const status = score === null ? 'verifier_error' : 'completed';
    out.push({
      stream,
      type: 'JudgeCompleted',
      data: judgeCompletedData({
        judge,
        status,
        exitCode: score === null ? 1 : 0,
        durationMs: 1000,
        outputDigest: EMPTY_OUTPUT_DIGEST,
        outputBytes: 0,
        detail: null,
      }) as JsonObject,
    });
    if (score !== null)
      out.push({
        stream,
        type: 'RewardRecorded',
        data: rewardRecordedData({ judge, rewards: { val_loss: score }, primaryMetric: 'val_loss', primaryScore: score }) as JsonObject,
      });
  });
  out.push(baselineDraft({ ...o, judges }));
  return out;
}

/**
 * A RejudgeCompleted as `assay rejudge` records it (stream `rejudge-<id>`): `scores` re-judged a run's snapshot of
 * `round`, against its recorded score; the verdict follows the tolerance.
 */
export function rejudgeDraft(o: {
  id: string;
  run: string;
  round: number;
  snapshot: string;
  recorded: number;
  scores: number[];
  tolerance?: number;
}): EventDraft {
  const sorted = [...o.scores].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  const median = sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  const tolerance = o.tolerance ?? 0.01;
  const delta = median - o.recorded;
  const matches = Math.abs(delta) <= tolerance;
  return {
    stream: `rejudge-${o.id}`,
    type: 'RejudgeCompleted',
    data: {
      snapshot: o.snapshot,
      run: o.run,
      round: o.round,
      status: 'completed',
      rewards: { val_loss: median },
      primaryScore: median,
      matches,
      verdict: matches ? 'reproduced' : 'not_reproduced',
      bundleDigest: 'sha256:' + 'd'.repeat(64),
      task: 'tiny-optimizer',
      taskDigest: 'sha256:0ebb429fa86d481c2630fac53db1c91cffed5d4d41d1021c179444eb67e7ee0b',
      protocolFingerprint: SAMPLE_FP,
      metric: 'val_loss',
      direction: 'minimize',
      recordedScore: o.recorded,
      scores: o.scores.map((s, i) => ({ judge: `j-rejudge-${o.id}-${i + 1}`, status: 'completed', primaryScore: s })),
      median,
      spread: sorted[sorted.length - 1]! - sorted[0]!,
      delta,
      tolerance,
    },
  };
}
