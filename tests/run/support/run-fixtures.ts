/**
 * Helpers for run tests: protocol and start inputs, a pure simulator that applies decide + evolve on an in-memory
 * history (with the Judge's events in their own streams), and service wiring over the in-memory fakes.
 */
import { ManualClock, SequentialIds } from '@assay/core';
import {
  buildRunRules,
  decide,
  evolve,
  FakeJudge,
  FakeSnapshotter,
  initialRunState,
  MemoryRunLedger,
  roundOf,
  runStream,
  SubmissionService,
  tokenSha256,
  type Decision,
  type FakeJudgeBehaviour,
  type JudgeStatus,
  type RunCommand,
  type RunEventRecord,
  type RunSettingsLike,
  type RunStartInput,
  type RunState,
  type SubmissionServiceOptions,
} from '@assay/run';

export const T0 = '2026-03-01T10:00:00.000Z';
export const TOKEN = '0123456789abcdef'.repeat(4);
export const TOKEN_SHA = tokenSha256(TOKEN);
export const BEARER = `Bearer ${TOKEN}`;

export const SETTINGS: RunSettingsLike = {
  primaryMetric: null,
  direction: 'maximize',
  maxSubmissions: null,
  cooldownSec: 0,
  timeBudgetSec: null,
  gpuBudgetSec: null,
};

export function startInput(
  run = 'r1',
  o: { settings?: Partial<RunSettingsLike>; agentTimeoutSec?: number | null; editablePaths?: string[] | null; tokenSha?: string } = {},
): RunStartInput {
  const { protocol, selection } = buildRunRules({
    settings: { ...SETTINGS, ...(o.settings ?? {}) },
    agentTimeoutSec: o.agentTimeoutSec ?? null,
    editablePaths: o.editablePaths ?? null,
    tokenSha256: o.tokenSha ?? TOKEN_SHA,
    fingerprintInput: { scheme: 'test' },
  });
  return {
    run,
    task: 'assay:test-task',
    taskDigest: 'sha256:abc',
    agent: 'reference',
    model: null,
    fingerprint: `sha256:${'f'.repeat(64)}`,
    protocol,
    selection,
  };
}

/** decide + evolve over an in-memory history, with a clock the test moves. */
export class Sim {
  state: RunState;
  readonly records: RunEventRecord[] = [];
  private revs = new Map<string, number>();
  now: number;
  private judges = 0;

  constructor(
    readonly run = 'r1',
    start: Parameters<typeof startInput>[1] | null = {},
  ) {
    this.state = initialRunState(run);
    this.now = Date.parse(T0);
    if (start !== null) this.ok({ kind: 'start', input: startInput(run, start) });
  }

  advance(sec: number): this {
    this.now += sec * 1000;
    return this;
  }

  get date(): Date {
    return new Date(this.now);
  }

  append(stream: string, events: ReadonlyArray<{ type: string; data: Record<string, unknown> }>): RunEventRecord[] {
    const out: RunEventRecord[] = [];
    for (const e of events) {
      const revision = (this.revs.get(stream) ?? -1) + 1;
      this.revs.set(stream, revision);
      const rec: RunEventRecord = {
        position: this.records.length,
        stream,
        revision,
        id: `id-${this.records.length}`,
        type: e.type,
        time: new Date(this.now).toISOString(),
        data: e.data,
      };
      this.records.push(rec);
      this.state = evolve(this.state, rec);
      out.push(rec);
    }
    return out;
  }

  do(cmd: RunCommand): Decision {
    const d = decide(this.state, cmd, this.date);
    if (d.events.length) this.append(runStream(this.run), d.events);
    return d;
  }

  /** Like do(), and fails unless there is no rejection. */
  ok(cmd: RunCommand): Decision {
    const d = this.do(cmd);
    if (d.rejection) throw new Error(`unexpected rejection ${d.rejection.code}: ${d.rejection.reason}`);
    return d;
  }

  submit(): Decision {
    return this.do({ kind: 'submit', auth: 'ok', hasBody: false, hasQuery: false });
  }

  snapshot(round: number | null, root: string): Decision {
    return this.ok({ kind: 'record_snapshot', round, snapshot: { root, files: 1, bytes: 10, durationMs: 1, policyDigest: 'sha256:p' }, edit: null });
  }

  /** Records the Judge's events for a round in a judge stream, as the real Judge does. */
  judge(
    round: number,
    status: JudgeStatus,
    rewards: Record<string, number> | null = null,
    o: { rule?: string; run?: string; launchOnly?: boolean } = {},
  ): string {
    this.judges += 1;
    const judge = `j${this.judges}`;
    const run = o.run ?? this.run;
    const snapshot = (run === this.run ? roundOf(this.state, round)?.snapshot?.root : undefined) ?? 'bafy';
    const events: Array<{ type: string; data: Record<string, unknown> }> = [
      { type: 'JudgeLaunched', data: { run, round, judge, image: 'sha256:i', snapshot, testsDigest: 'sha256:t', limits: {}, network: 'none' } },
    ];
    if (!o.launchOnly) {
      events.push({ type: 'JudgeCompleted', data: { run, round, judge, status, exitCode: 0, durationMs: 3, outputDigest: 'sha256:o', outputBytes: 0 } });
      if (rewards) events.push({ type: 'RewardRecorded', data: { run, round, judge, rewards, primaryMetric: null, primaryScore: null } });
      if (o.rule) events.push({ type: 'RuleViolation', data: { run, round, rule: o.rule, detail: 'broke it', score: 0 } });
    }
    this.append(`judge-${judge}`, events);
    return judge;
  }

  /** A whole judged round: submit, snapshot, judge, settle. */
  round(status: JudgeStatus, rewards: Record<string, number> | null, root = `bafy${this.state.rounds.length + 1}`): number {
    const d = this.submit();
    if (d.rejection) throw new Error(`unexpected rejection ${d.rejection.code}: ${d.rejection.reason}`);
    const n = this.state.rounds.length;
    this.snapshot(n, root);
    this.judge(n, status, rewards);
    this.ok({ kind: 'settle', round: n });
    return n;
  }
}

export interface Wiring {
  ledger: MemoryRunLedger;
  snapshotter: FakeSnapshotter;
  judge: FakeJudge;
  clock: ManualClock;
  ids: SequentialIds;
  deps: ConstructorParameters<typeof SubmissionService>[0];
}

let wirings = 0;
export function wiring(
  o: {
    run?: string;
    script?: FakeJudgeBehaviour[];
    files?: Record<string, string>;
    options?: SubmissionServiceOptions;
    ledger?: MemoryRunLedger;
    clock?: ManualClock;
  } = {},
): Wiring {
  wirings += 1;
  const clock = o.clock ?? new ManualClock(T0);
  const ids = new SequentialIds(`${wirings.toString(16).padStart(8, '0')}-0000-4000-8000`);
  const ledger = o.ledger ?? new MemoryRunLedger(clock);
  const snapshotter = new FakeSnapshotter(o.files ?? { 'solve.py': 'v0' });
  const judge = new FakeJudge((stream, events, expected) => ledger.appendTo(stream, events, expected), ids, o.script);
  return {
    ledger,
    snapshotter,
    judge,
    clock,
    ids,
    deps: { run: o.run ?? 'r1', ledger, snapshotter, judge, clock, ids, ...(o.options ? { options: o.options } : {}) },
  };
}

/** A submit request; `null` for no Authorization header. */
export const submitReq = (authorization: string | null = BEARER, o: { hasBody?: boolean; hasQuery?: boolean } = {}) => ({
  authorization: authorization ?? undefined,
  hasBody: o.hasBody ?? false,
  hasQuery: o.hasQuery ?? false,
});
