/**
 * A scripted JudgePort for tests that behaves like the real one towards the ledger: it records JudgeLaunched,
 * JudgeCompleted, RewardRecorded and RuleViolation in a `judge-<id>` stream with `data.run` and `data.round`, then
 * returns. Behaviours are taken from `script` in order (the last one repeats).
 */
import type { IdGenerator } from '@assay/core';
import type { JudgeStatus } from '../domain/run-events';
import type { JudgeOutcome, JudgePort, JudgeRequest } from '../ports/judge.port';
import type { ForeignEvent } from './memory-run-ledger.adapter';

export type FakeJudgeBehaviour =
  | {
      readonly status: JudgeStatus;
      readonly rewards?: Readonly<Record<string, number>> | null;
      readonly detail?: string | null;
      readonly rule?: { readonly rule: string; readonly detail: string } | null;
      readonly gpuSeconds?: number;
      /** Record only JudgeLaunched, then throw (a Judge that died). */
      readonly dieAfterLaunch?: boolean;
    }
  /** Throw before recording anything (Docker unreachable). */
  | { readonly throws: Error }
  /** Wait until the request's signal aborts (or `release` is called), then record infrastructure_error. */
  | { readonly hang: true };

export type EventWriter = (stream: string, events: ForeignEvent[], expected: 'no_stream' | 'any') => Promise<unknown>;

export const EMPTY_OUTPUT_DIGEST = 'sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

export class FakeJudge implements JudgePort {
  readonly calls: JudgeRequest[] = [];
  private n = 0;
  private releases: Array<() => void> = [];
  /** Called when a judging starts (tests use it to act mid-Judge). */
  onJudge: ((req: JudgeRequest) => void | Promise<void>) | null = null;
  /** Called after the Judge's events are recorded, before it returns (tests: a controller dying right then). */
  onRecorded: ((req: JudgeRequest) => void | Promise<void>) | null = null;

  constructor(
    private readonly write: EventWriter,
    private readonly ids: IdGenerator,
    private readonly script: FakeJudgeBehaviour[] = [{ status: 'completed', rewards: { reward: 1 } }],
    private readonly logPath: (round: number) => string | null = (round) => `/logs/assay/round-${round}.log`,
  ) {}

  private released = false;

  /** Releases hanging Judges, now and from now on. */
  release(): void {
    this.released = true;
    for (const r of this.releases.splice(0)) r();
  }

  async judge(req: JudgeRequest): Promise<JudgeOutcome> {
    this.calls.push(req);
    const b = this.script[Math.min(this.n, this.script.length - 1)] ?? { status: 'completed', rewards: { reward: 1 } };
    this.n += 1;
    if (this.onJudge) await this.onJudge(req);
    if ('throws' in b) throw b.throws;
    const judge = `fake-${this.n}-r${req.round}`;
    const stream = `judge-${judge}`;
    const ev = (type: string, data: Record<string, unknown>): ForeignEvent => ({
      type,
      data: { run: req.run, round: req.round, ...data },
      id: this.ids.next(),
    });
    const launched = ev('JudgeLaunched', {
      judge,
      image: `sha256:${'1'.repeat(64)}`,
      snapshot: req.snapshot,
      testsDigest: `sha256:${'2'.repeat(64)}`,
      limits: {},
      network: 'none',
    });
    let status: JudgeStatus;
    let detail: string | null = null;
    let rewards: Readonly<Record<string, number>> | null = null;
    let rule: { rule: string; detail: string } | null = null;
    let gpuSeconds = 0;
    if ('hang' in b) {
      await this.write(stream, [launched], 'no_stream');
      await new Promise<void>((resolve) => {
        if (this.released || req.signal?.aborted) return resolve();
        this.releases.push(resolve);
        req.signal?.addEventListener('abort', () => resolve(), { once: true });
      });
      status = 'infrastructure_error';
      detail = 'the Judge was stopped (run cancelled)';
      await this.write(
        stream,
        [ev('JudgeCompleted', { judge, status, exitCode: null, durationMs: 1, outputDigest: EMPTY_OUTPUT_DIGEST, outputBytes: 0, detail })],
        'any',
      ).catch(() => undefined);
      return { judge, status, rewards: null, primaryScore: null, detail, log: null, gpuSeconds: 0 };
    }
    if (b.dieAfterLaunch) {
      await this.write(stream, [launched], 'no_stream');
      throw new Error('the Judge process died');
    }
    status = b.status;
    detail = b.detail ?? null;
    rewards = status === 'completed' ? (b.rewards ?? { reward: 1 }) : null;
    rule = status === 'submission_error' ? (b.rule ?? { rule: 'snapshot.path_not_allowed', detail: 'x: not allowed' }) : null;
    gpuSeconds = b.gpuSeconds ?? 0;
    const events = [
      launched,
      ev('JudgeCompleted', {
        judge,
        status,
        exitCode: status === 'completed' ? 0 : null,
        durationMs: 5,
        outputDigest: EMPTY_OUTPUT_DIGEST,
        outputBytes: 0,
        ...(detail ? { detail } : {}),
      }),
    ];
    const keys = rewards ? Object.keys(rewards) : [];
    const primaryMetric = rewards ? (rewards.reward !== undefined ? 'reward' : keys.length === 1 ? (keys[0] as string) : null) : null;
    const primaryScore = rewards && primaryMetric !== null ? (rewards[primaryMetric] as number) : null;
    if (rewards) events.push(ev('RewardRecorded', { judge, rewards: { ...rewards }, primaryMetric, primaryScore }));
    if (rule) events.push(ev('RuleViolation', { rule: rule.rule, detail: rule.detail, score: 0 }));
    await this.write(stream, events, 'no_stream');
    if (this.onRecorded) await this.onRecorded(req);
    return { judge, status, rewards, primaryScore, detail, log: status === 'infrastructure_error' ? null : this.logPath(req.round), gpuSeconds };
  }
}
