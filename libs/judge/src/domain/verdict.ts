/**
 * From what happened in a Judge to its status: pure decisions, no Docker.
 *
 *   infrastructure_error  the harness or Docker failed, or test.sh reported an infrastructure fault
 *                         (/logs/verifier/infrastructure-error.txt, no reward); no score (the controller refunds)
 *   submission_error      the snapshot broke a rule the harness checks before running anything (RuleViolation, 0)
 *   verifier_timeout      test.sh ran past the verifier timeout; the container was killed, reward files discarded
 *   verifier_error        test.sh finished but left no valid reward (see reward.ts), whatever its exit code
 *   completed             a valid reward was read; test.sh's exit code is recorded but does not change the status
 */
import { JUDGE_STATUSES } from '@assay/ledger';
import { choosePrimaryMetric, INFRASTRUCTURE_REPORT, type PrimaryMetric, type RewardParse, type Rewards } from './reward';

/** The Judge's statuses are the ledger catalogue's (JudgeCompleted.status): one definition. */
export { JUDGE_STATUSES };
export type JudgeStatus = (typeof JUDGE_STATUSES)[number];

export type JudgeRun =
  | { readonly kind: 'exited'; readonly exitCode: number; readonly oomKilled: boolean }
  | { readonly kind: 'timed_out'; readonly timeoutSec: number; readonly oomKilled: boolean }
  | { readonly kind: 'infrastructure'; readonly detail: string };

export interface VerdictInput {
  readonly run: JudgeRun;
  /** The parsed reward files; ignored unless the run exited. */
  readonly rewards: RewardParse | null;
  /** test.sh's report of an infrastructure fault (parseInfrastructureReport); ignored unless the run exited. */
  readonly infrastructureReport?: string | null;
  readonly requestedMetric: string | null;
  readonly memoryLimitBytes: number | null;
}

export interface Verdict {
  readonly status: JudgeStatus;
  readonly rewards: Rewards | null;
  readonly primary: PrimaryMetric | null;
  readonly exitCode: number | null;
  readonly detail: string | null;
}

const mib = (b: number): string => `${Math.round(b / 1048576)} MiB`;

function oomNote(oom: boolean, limit: number | null): string | null {
  return oom ? `the kernel's out-of-memory killer ended a process in the Judge (memory limit ${limit === null ? 'none' : mib(limit)})` : null;
}

const join = (...parts: Array<string | null>): string | null => {
  const p = parts.filter((x): x is string => x !== null && x !== '');
  return p.length ? p.join('; ') : null;
};

export function decideVerdict(i: VerdictInput): Verdict {
  const r = i.run;
  if (r.kind === 'infrastructure') return { status: 'infrastructure_error', rewards: null, primary: null, exitCode: null, detail: r.detail };
  if (r.kind === 'timed_out') {
    return {
      status: 'verifier_timeout',
      rewards: null,
      primary: null,
      exitCode: null,
      detail: join(
        `test.sh ran longer than the verifier timeout of ${r.timeoutSec} s; the Judge was killed and its reward files discarded`,
        oomNote(r.oomKilled, i.memoryLimitBytes),
      ),
    };
  }
  const exit = r.exitCode === 0 ? null : `test.sh exited with status ${r.exitCode}`;
  const oom = oomNote(r.oomKilled, i.memoryLimitBytes);
  const report = i.infrastructureReport ?? null;
  if (report !== null) {
    // a reward beside the report contradicts it: neither is trusted, and the round is not refunded
    if (i.rewards?.ok)
      return {
        status: 'verifier_error',
        rewards: null,
        primary: null,
        exitCode: r.exitCode,
        detail: join(`the verifier wrote both ${i.rewards.source} and ${INFRASTRUCTURE_REPORT} (${report})`, exit, oom),
      };
    return {
      status: 'infrastructure_error',
      rewards: null,
      primary: null,
      exitCode: r.exitCode,
      detail: join(`the verifier reported an infrastructure fault: ${report}`, exit, oom),
    };
  }
  if (!i.rewards) return { status: 'verifier_error', rewards: null, primary: null, exitCode: r.exitCode, detail: join('no reward was read', exit, oom) };
  if (!i.rewards.ok) return { status: 'verifier_error', rewards: null, primary: null, exitCode: r.exitCode, detail: join(i.rewards.reason, exit, oom) };
  const primary = choosePrimaryMetric(i.rewards.rewards, i.requestedMetric);
  return {
    status: 'completed',
    rewards: i.rewards.rewards,
    primary,
    exitCode: r.exitCode,
    detail: join(exit ? `${exit} after writing ${i.rewards.source}` : null, oom, primary.note),
  };
}

/** The median of finite numbers (the mean of the middle two for an even count), or null for none. */
export function median(values: readonly number[]): number | null {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return null;
  const mid = v.length >> 1;
  return v.length % 2 === 1 ? (v[mid] as number) : ((v[mid - 1] as number) + (v[mid] as number)) / 2;
}
