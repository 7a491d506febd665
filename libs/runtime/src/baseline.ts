/**
 * `assay baseline TASK_DIR [--repeat N]`: the matched baselines of a task (docs/task-format.md, "Baselines"). The
 * starting workspace (the Work image's workdir as built) and, where the task has solution/, the oracle's workspace
 * (applied as Harbor's oracle agent applies it) are taken out exactly as `assay task check` takes them (its
 * extractDir / applyOracle), snapshotted into the store of ASSAY_HOME and judged N times each by the real Judge of
 * ASSAY_HOME (JudgeLaunched, JudgeCompleted, RewardRecorded in its ledger, as `assay judge` records them). Then one
 * BaselineRecorded per kind, signed by the controller key, is appended to the stream `baseline-<task id>` in one
 * atomic append that expects the stream's revision read just before (a concurrent writer makes it fail; nothing is
 * half-written).
 *
 * The protocol is the one `assay run TASK_DIR` with no run-setting flags would record: run-fingerprint.ts computes
 * the task digest and the fingerprint for both.
 */
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { AssayError, systemClock, type Clock, type IdGenerator, type Progress } from '@assay/core';
import type { ContainerRuntime } from '@assay/containers';
import { judgeError } from '@assay/judge';
import { loadTaskPlan, type RunSettingsOverrides } from '@assay/task-format';
import { baselineEventData, baselineStream, summarizeScores, taskIdOf, type BaselineKind, type BaselineRepeat } from '@assay/run';
import type { JsonObject } from '@assay/ledger';
import { judgeRuntimeFor, type JudgeRuntimeSource } from './judge-runtime';
import { runFingerprint } from './run-fingerprint';
import { applyOracle, containerSpec, extractDir } from './task-check';

export interface BaselineOptions {
  /** Times the recording (its duration) and stamps its events; the system's by default. */
  readonly clock?: Clock;
  /** The ids of its events and Judges; random by default. */
  readonly ids?: IdGenerator;
  /** The module's JudgeRuntime (RuntimeModule binds it); absent: one opened over `home` for the call. */
  readonly judgeRuntime?: JudgeRuntimeSource;
  /** ASSAY_HOME: its ledger records the Judges and the baselines; its store keeps the snapshots judged. */
  readonly home: string;
  /** Judges of each workspace (1 to 20; default 3). */
  readonly repeat?: number;
  readonly progress?: Progress;
  readonly log?: (line: string) => void;
  readonly containers?: ContainerRuntime;
  /** Aborting kills the running Judge (recorded as such), starts no other, records no baseline: JUDGE_CANCELLED. */
  readonly signal?: AbortSignal;
  /** The run settings a run would be given on its command line (`assay run --max-submissions ...`): the same protocol. */
  readonly overrides?: RunSettingsOverrides;
}

export interface RecordedBaseline {
  readonly kind: BaselineKind;
  readonly snapshot: string;
  readonly repeats: number;
  readonly scores: readonly BaselineRepeat[];
  readonly median: number | null;
  readonly min: number | null;
  readonly max: number | null;
  /** Log position of its BaselineRecorded. */
  readonly position: number;
}

export interface BaselineReport {
  readonly dir: string;
  readonly name: string;
  readonly task: string;
  readonly taskDigest: string;
  readonly protocolFingerprint: string;
  readonly fingerprintInput: JsonObject;
  readonly metric: string | null;
  readonly direction: 'maximize' | 'minimize';
  readonly judgeImageDigest: string;
  readonly stream: string;
  readonly baselines: readonly RecordedBaseline[];
  /** Why there is no oracle baseline (the task has no solution/), else null. */
  readonly noOracle: string | null;
  readonly durationMs: number;
}

export const BASELINE_ERROR_CODES = {
  UNSUPPORTED: 'BASELINE_UNSUPPORTED',
  ORACLE_FAILED: 'BASELINE_ORACLE_FAILED',
  KEYS_MISSING: 'BASELINE_KEYS_MISSING',
} as const;

export async function recordBaseline(taskDir: string, o: BaselineOptions): Promise<BaselineReport> {
  const clock = o.clock ?? systemClock;
  const started = clock.now().getTime();
  const dir = resolve(taskDir);
  const repeat = o.repeat ?? 3;
  const log = o.log ?? (() => undefined);
  await loadTaskPlan(dir); // an invalid task fails here, before Docker or the ledger is touched
  const rt = await judgeRuntimeFor(o);
  const scratch = fs.mkdtempSync(join(tmpdir(), 'assay-baseline-'));
  try {
    const ledger = rt.ledgerHome.ledger;
    if (!ledger.key('controller'))
      throw new AssayError(
        BASELINE_ERROR_CODES.KEYS_MISSING,
        'invalid_input',
        `no controller key in ${join(rt.home, 'keys')}; BaselineRecorded is signed by the controller key (\`assay ledger init\` creates it)`,
      );
    o.signal?.addEventListener('abort', () => void rt.runner.cancel('cancelled'), { once: true });
    const stopIfCancelled = () => {
      if (o.signal?.aborted || rt.runner.isCancelled) throw judgeError('JUDGE_CANCELLED', 'baseline cancelled; no baseline was recorded');
    };
    await rt.containers.ping();

    log('building images');
    // the primary metric decides each Judge's score, so an overridden one is the Judges' too (as in a run)
    const task = await rt.loadTask(dir, { hostEnv: process.env, metric: o.overrides?.primaryMetric ?? null });
    const p = task.prepared;
    const plan = task.plan;
    if (p.rootfs) throw new AssayError(BASELINE_ERROR_CODES.UNSUPPORTED, 'invalid_input', `${dir}: full-rootfs tasks (workdir "/") have no baseline yet`);
    const fp = await runFingerprint({
      plan,
      taskDir: dir,
      judgeImageDigest: task.images.judge.id,
      ...(o.overrides ? { overrides: o.overrides } : {}),
      digestDirectory: (d) => rt.snapshots.digestDirectory(d),
    });

    log('taking the starting workspace out of the Work image');
    const base = containerSpec(task.images.work.id, p.workdir, plan);
    const startDir = join(scratch, 'start');
    const probe = await rt.containers.createContainer({ ...base, cmd: ['true'] });
    try {
      await extractDir(rt.containers, probe, p.workdir, startDir);
    } finally {
      await rt.containers.removeContainer(probe).catch(() => undefined);
    }
    const workspaces: Array<{ kind: BaselineKind; path: string }> = [{ kind: 'start', path: startDir }];
    let noOracle: string | null = null;
    if (fs.existsSync(join(dir, 'solution'))) {
      stopIfCancelled();
      log('applying the oracle (solution/)');
      const oracleDir = join(scratch, 'oracle');
      const r = await applyOracle(rt.containers, base, dir, p.workdir, oracleDir, plan);
      if (r.error) throw new AssayError(BASELINE_ERROR_CODES.ORACLE_FAILED, 'integrity', `${dir}: oracle: ${r.error}; no baseline was recorded`);
      workspaces.push({ kind: 'oracle', path: oracleDir });
    } else noOracle = 'the task has no solution/';

    const judged: Array<{ kind: BaselineKind; snapshot: string; scores: BaselineRepeat[] }> = [];
    for (const w of workspaces) {
      const snapshot = await rt.snapshots.snapshotDirectory(w.path);
      const scores: BaselineRepeat[] = [];
      for (let i = 0; i < repeat; i++) {
        stopIfCancelled();
        log(`judging the ${w.kind} (${i + 1}/${repeat})`);
        const r = await rt.runner.judge(p, snapshot);
        scores.push({ judge: r.judge, status: r.status, primaryScore: r.status === 'completed' ? r.primaryScore : null });
      }
      judged.push({ kind: w.kind, snapshot, scores });
    }
    stopIfCancelled();

    const taskId = taskIdOf(plan.name);
    const stream = baselineStream(taskId);
    const common = {
      task: taskId,
      taskDigest: fp.digests.task,
      protocolFingerprint: fp.fingerprint,
      fingerprintInput: fp.input,
      metric: fp.settings.primaryMetric,
      direction: fp.settings.direction,
      judgeImageDigest: task.images.judge.id,
    };
    // one writer at a time: the append expects the revision read here (a concurrent `assay baseline` of the same
    // task makes it fail with the ledger's revision conflict, and nothing of this append is written)
    const revision = await ledger.store.streamRevision(stream);
    const appended = await ledger.append(
      stream,
      judged.map((j) => ({ type: 'BaselineRecorded', data: baselineEventData({ ...common, kind: j.kind, snapshot: j.snapshot, scores: j.scores }) })),
      revision === null ? 'no_stream' : revision,
    );
    const baselines = judged.map((j, i) => {
      const s = summarizeScores(j.scores.map((x) => x.primaryScore));
      return {
        kind: j.kind,
        snapshot: j.snapshot,
        repeats: j.scores.length,
        scores: j.scores,
        median: s.median,
        min: s.min,
        max: s.max,
        position: appended.events[i]?.position ?? -1,
      };
    });
    return {
      dir,
      name: plan.name,
      ...common,
      stream,
      baselines,
      noOracle,
      durationMs: clock.now().getTime() - started,
    };
  } finally {
    await rt.close();
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}
