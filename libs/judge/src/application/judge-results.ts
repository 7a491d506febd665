import * as fs from 'node:fs';
import { join } from 'node:path';
import { escapeTerminalText, isAssayError } from '@assay/core';
import type { ContainerInfo } from '@assay/containers';
import { judgeCompletedData, launchedLimits, rewardRecordedData, ruleViolationData, type LaunchedLimits, type RunRef } from '../domain/judge-events';
import type { Rewards } from '../domain/reward';
import type { VerifierFiles } from './reward-files';
import { decideVerdict, type JudgeRun, type JudgeStatus } from '../domain/verdict';
import { judgeError } from '../judge.errors';
import type { JudgeRecorder, RecordedPosition } from '../ports/judge-recorder.port';
import type { PreparedTask } from './judge-prepare';
import type { CapturedOutput, OutputCapture } from './output-capture';

// How a Judge ends: the events recorded for it (one append, judge key) and its result, written to result.json.

/**
 * Text from a Judge (its output, a setup failure, a rule's detail) as it goes into a signed, one-line `detail`: every
 * control, bidi and invisible character shown as an escape, never executed where it is later printed. Idempotent,
 * so the recorded detail and the one returned are the same text.
 */
const oneLine = (text: string): string => escapeTerminalText(text, { newlines: true });

/** An error as the text of a detail (with its code when it has one). */
export function message(e: unknown): string {
  if (isAssayError(e)) return `${e.code}: ${e.message}`;
  return e instanceof Error ? e.message : String(e);
}

export interface JudgeResult {
  readonly judge: string;
  readonly stream: string;
  readonly status: JudgeStatus;
  readonly exitCode: number | null;
  readonly durationMs: number;
  readonly rewards: Rewards | null;
  readonly primaryMetric: string | null;
  readonly primaryScore: number | null;
  readonly detail: string | null;
  readonly snapshot: string;
  readonly image: string;
  readonly testsDigest: string;
  /** The network mode Docker applied; null when no container was created. */
  readonly network: string | null;
  readonly limits: LaunchedLimits | null;
  readonly rule: { readonly rule: string; readonly detail: string } | null;
  readonly output: CapturedOutput;
  readonly events: readonly RecordedPosition[];
  /** `<home>/judges/<id>`: output.log and result.json. */
  readonly dir: string;
}

/** One Judge under way: who it is, where its files are, and what it has captured and recorded so far. */
export interface JudgeContext {
  readonly judgeId: string;
  readonly stream: string;
  /** `<home>/judges/<id>`. */
  readonly dir: string;
  readonly ownerFile: string;
  readonly startedAt: Date;
  readonly ref: RunRef;
  readonly base: RunRef & { judge: string };
  readonly snapshot: string;
  /** The task's judge image. */
  readonly image: string;
  readonly capture: OutputCapture;
  readonly events: RecordedPosition[];
  readonly elapsed: () => number;
}

/** Appends a Judge's events; a failure is JUDGE_RECORD_FAILED (the ledger is the one thing a Judge cannot do without). */
async function recordEvents(
  recorder: JudgeRecorder,
  stream: string,
  events: Array<{ type: string; data: Record<string, unknown> }>,
  expected: 'no_stream' | number,
): Promise<RecordedPosition[]> {
  try {
    return await recorder.append(stream, events, expected);
  } catch (e) {
    throw judgeError('JUDGE_RECORD_FAILED', `recording ${events.map((x) => x.type).join(' + ')} on ${stream} failed: ${message(e)}`, { stream }, e);
  }
}

/** A broken snapshot rule: RuleViolation and JudgeCompleted (submission_error, score 0), and nothing runs. */
export async function finishRule(recorder: JudgeRecorder, t: PreparedTask, c: JudgeContext, f: { rule: string; detail: string }): Promise<JudgeResult> {
  const out = c.capture.finish();
  c.events.push(
    ...(await recordEvents(
      recorder,
      c.stream,
      [
        { type: 'RuleViolation', data: ruleViolationData({ ...c.ref, rule: f.rule, detail: f.detail }) },
        {
          type: 'JudgeCompleted',
          data: judgeCompletedData({
            ...c.base,
            status: 'submission_error',
            exitCode: null,
            durationMs: c.elapsed(),
            outputDigest: out.digest,
            outputBytes: out.totalBytes,
            detail: `rule ${f.rule} broken: ${f.detail}`,
          }),
        },
      ],
      'no_stream',
    )),
  );
  return writeResult(t, c, out, {
    status: 'submission_error',
    exitCode: null,
    durationMs: c.elapsed(),
    rewards: null,
    primaryMetric: null,
    primaryScore: 0,
    detail: oneLine(`rule ${f.rule} broken: ${f.detail}`),
    rule: { rule: oneLine(f.rule), detail: oneLine(f.detail) },
    applied: null,
  });
}

/** A Judge that ended before its container ran: JudgeCompleted (infrastructure_error, no score). */
export async function finishInfra(
  recorder: JudgeRecorder,
  t: PreparedTask,
  c: JudgeContext,
  detail: string,
  applied: ContainerInfo | null,
): Promise<JudgeResult> {
  const out = c.capture.finish();
  const durationMs = c.elapsed();
  c.events.push(
    ...(await recordEvents(
      recorder,
      c.stream,
      [
        {
          type: 'JudgeCompleted',
          data: judgeCompletedData({
            ...c.base,
            status: 'infrastructure_error',
            exitCode: null,
            durationMs,
            outputDigest: out.digest,
            outputBytes: out.totalBytes,
            detail,
          }),
        },
      ],
      'no_stream',
    )),
  );
  return writeResult(t, c, out, {
    status: 'infrastructure_error',
    exitCode: null,
    durationMs,
    rewards: null,
    primaryMetric: null,
    primaryScore: null,
    detail: oneLine(detail),
    rule: null,
    applied,
  });
}

/** 7. A verdict from the run and the reward files: JudgeCompleted (+ RewardRecorded when completed), judge key. */
export async function finishVerdict(
  recorder: JudgeRecorder,
  t: PreparedTask,
  c: JudgeContext,
  run: JudgeRun,
  files: VerifierFiles | null,
  notes: readonly string[],
  applied: ContainerInfo | null,
): Promise<JudgeResult> {
  const out = c.capture.finish();
  const verdict = decideVerdict({
    run,
    rewards: files?.rewards ?? null,
    infrastructureReport: files?.infrastructureReport ?? null,
    requestedMetric: t.requestedMetric,
    memoryLimitBytes: t.limits.memoryBytes,
  });
  const detailParts = [verdict.detail, out.truncated ? `output truncated: kept the first ${out.keptBytes} of ${out.totalBytes} bytes` : null, ...notes].filter(
    (x): x is string => !!x,
  );
  const detail = detailParts.length ? oneLine(detailParts.join('; ')) : null;
  const durationMs = c.elapsed();
  const completion: Array<{ type: string; data: Record<string, unknown> }> = [
    {
      type: 'JudgeCompleted',
      data: judgeCompletedData({
        ...c.base,
        status: verdict.status,
        exitCode: verdict.exitCode,
        durationMs,
        outputDigest: out.digest,
        outputBytes: out.totalBytes,
        detail,
      }),
    },
  ];
  if (verdict.status === 'completed' && verdict.rewards) {
    completion.push({
      type: 'RewardRecorded',
      data: rewardRecordedData({
        ...c.base,
        rewards: verdict.rewards,
        primaryMetric: verdict.primary?.metric ?? null,
        primaryScore: verdict.primary?.score ?? null,
      }),
    });
  }
  c.events.push(...(await recordEvents(recorder, c.stream, completion, 0)));
  return writeResult(t, c, out, {
    status: verdict.status,
    exitCode: verdict.exitCode,
    durationMs,
    rewards: verdict.rewards,
    primaryMetric: verdict.primary?.metric ?? null,
    primaryScore: verdict.primary?.score ?? null,
    detail,
    rule: null,
    applied,
  });
}

/** How a Judge ended; with the Judge's context, its result. `applied`: what the daemon applied, when a container was created. */
type Ending = Pick<JudgeResult, 'status' | 'exitCode' | 'durationMs' | 'rewards' | 'primaryMetric' | 'primaryScore' | 'detail' | 'rule'> & {
  readonly applied: ContainerInfo | null;
};

/** The Judge's result: written to result.json (the output as a plain object), then owner.json is removed: the Judge is finished. */
function writeResult(t: PreparedTask, c: JudgeContext, out: CapturedOutput, e: Ending): JudgeResult {
  const r: JudgeResult = {
    judge: c.judgeId,
    stream: c.stream,
    status: e.status,
    exitCode: e.exitCode,
    durationMs: e.durationMs,
    rewards: e.rewards,
    primaryMetric: e.primaryMetric,
    primaryScore: e.primaryScore,
    detail: e.detail,
    snapshot: c.snapshot,
    image: c.image,
    testsDigest: t.testsDigest,
    network: e.applied?.networkMode ?? null,
    limits: e.applied ? launchedLimits(t.limits, e.applied) : null,
    rule: e.rule,
    output: out,
    events: c.events,
    dir: c.dir,
  };
  const { output, ...rest } = r;
  fs.writeFileSync(join(c.dir, 'result.json'), `${JSON.stringify({ ...rest, output: { ...output } }, null, 2)}\n`, { mode: 0o644 });
  fs.rmSync(c.ownerFile, { force: true });
  return r;
}
