/**
 * `assay task check DIR`: is a task sound? It validates the task, builds its images, takes the starting workspace
 * out of the Work image, applies the oracle the way Harbor's oracle agent does (solution/ at /solution, then
 * `bash /solution/solve.sh` in the workdir, in a container of the Work image; without solve.sh, solution/'s files
 * are copied over the workdir), judges the start and the oracle N times each and a hostile copy of the start once
 * through the real Judge, and reports each check (libs/task-format/src/domain/task-check.ts; docs/task-format.md,
 * "Authoring a task").
 *
 * The Judges run in a scratch ASSAY_HOME (a fresh ledger and store under the system's temporary directory, removed
 * afterwards): checking a task records nothing in the operator's ledger. Images are shared through Docker as usual.
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { randomIds, systemClock, type Clock, type IdGenerator, type Progress } from '@assay/core';
import { readTar, type ContainerRuntime, type ContainerSpec } from '@assay/containers';
import { initLedgerHome } from '@assay/ledger';
import {
  CHECK_NAMES,
  checkTolerance,
  findDockerfileLeaks,
  findRootInterpreterRisks,
  hostileVerdict,
  judgedChecks,
  plantHostile,
  validateTaskDir,
  type CheckName,
  type CheckResult,
  type JudgeOutcome,
  type TaskPlan,
} from '@assay/task-format';
import { judgeError, type JudgeResult } from '@assay/judge';
import type { GpuRuntimeCheck } from '@assay/run';
import { openJudgeRuntime, type JudgeRuntime, type LoadedTask } from './judge-runtime';
import { DockerGpuRuntimeCheck, daemonInfoOf } from './gpu-host';

export interface TaskCheckOptions {
  /** Times the check (its duration and the image builds'); the system's by default. */
  readonly clock?: Clock;
  /** The ids of the scratch ledger's events and of the Judges; random by default. */
  readonly ids?: IdGenerator;
  /** Judges of the start and of the oracle, each (1 to 20; default 2). */
  readonly repeat?: number;
  readonly progress?: Progress;
  /** One line per step, for a terminal. */
  readonly log?: (line: string) => void;
  readonly containers?: ContainerRuntime;
  /** Aborting kills the running Judge (recorded in the scratch ledger), starts no other and ends with JUDGE_CANCELLED. */
  readonly signal?: AbortSignal;
  /**
   * `--gpus LIST`: host GPUs for a task whose verifier needs them; each Judge gets the first `verifier.gpus` of the
   * list (one Judge at a time). Checked first as `assay run --gpus` checks it (the Docker daemon can give GPUs).
   */
  readonly gpus?: readonly string[];
  /** Default DockerGpuRuntimeCheck (`docker info`); tests pass FakeGpuRuntimeCheck. */
  readonly gpuRuntimeCheck?: GpuRuntimeCheck;
}

export interface TaskCheckReport {
  readonly dir: string;
  readonly name: string | null;
  readonly sound: boolean;
  readonly checks: readonly CheckResult[];
  readonly judges: { readonly start: readonly JudgeOutcome[]; readonly oracle: readonly JudgeOutcome[]; readonly hostile: JudgeOutcome | null };
  readonly images: { readonly work: string; readonly judge: string } | null;
  readonly durationMs: number;
}

const LABELS = { 'org.assay.role': 'task-check' };
const MAX_ARCHIVE = 4 * 2 ** 30;
const MIN_LEAK_BYTES = 32;

export async function checkTask(taskDir: string, o: TaskCheckOptions = {}): Promise<TaskCheckReport> {
  const clock = o.clock ?? systemClock;
  const started = clock.now().getTime();
  const dir = resolve(taskDir);
  const repeat = o.repeat ?? 2;
  const log = o.log ?? (() => undefined);
  const results = new Map<CheckName, CheckResult>();
  const set = (name: CheckName, status: CheckResult['status'], detail: string) => results.set(name, { name, status, detail });
  const judges: { start: JudgeOutcome[]; oracle: JudgeOutcome[]; hostile: JudgeOutcome | null } = { start: [], oracle: [], hostile: null };
  let images: TaskCheckReport['images'] = null;
  let name: string | null = null;

  const finish = (): TaskCheckReport => {
    const checks = CHECK_NAMES.map((n) => results.get(n) ?? { name: n, status: 'skipped' as const, detail: 'not reached' });
    return { dir, name, sound: !checks.some((c) => c.status === 'failed'), checks, judges, images, durationMs: clock.now().getTime() - started };
  };

  log('validating');
  const v = await validateTaskDir(dir);
  if (!v.ok || !v.plan) {
    const p = v.problems[0];
    set('valid', 'failed', p ? `${v.problems.length} problem(s); first: ${p.code} ${p.file}: ${p.key ? `${p.key}: ` : ''}${p.message}` : 'invalid');
    return finish();
  }
  const plan = v.plan;
  name = plan.name;
  const tolerance = checkTolerance(plan.metadata as Record<string, unknown>);
  if (typeof tolerance === 'string') {
    set('valid', 'failed', tolerance);
    return finish();
  }
  set(
    'valid',
    'ok',
    `${plan.name} (schema ${plan.schemaVersion})${v.warnings.length ? `; ${v.warnings.length} warning(s): ${v.warnings.map((w) => w.code).join(', ')}` : ''}`,
  );

  const hidden = hiddenFiles(dir);
  set('leak-context', ...leakContext(dir, hidden));
  // Static: before the build when the task names its workdir, else once the image says what it is.
  if (plan.environment.workdir !== null) set('verifier-interpreters', ...interpreterCheck(dir, plan.environment.workdir));

  const scratch = fs.mkdtempSync(join(tmpdir(), 'assay-task-check-'));
  let rt: JudgeRuntime | null = null;
  try {
    const home = join(scratch, 'home');
    await initLedgerHome(home, { clock: o.clock ?? systemClock, ids: o.ids ?? randomIds, origin: 'assay.task-check/scratch' });
    rt = await openJudgeRuntime({ ...o, home });
    const runtime = rt.containers;
    const opened = rt;
    o.signal?.addEventListener('abort', () => void opened.runner.cancel('cancelled'), { once: true });
    const stopIfCancelled = () => {
      if (o.signal?.aborted || opened.runner.isCancelled) throw judgeError('JUDGE_CANCELLED', 'task check cancelled; the containers it started were removed');
    };
    await runtime.ping();

    // GPUs: the verifier's, from --gpus (the Work image's oracle and probe containers get none)
    const needed = plan.verifier.gpus;
    const judgeGpus = (o.gpus ?? []).slice(0, needed);
    if (needed > 0) {
      if (judgeGpus.length < needed) {
        set(
          'build',
          'failed',
          `the verifier needs ${needed} GPU(s) (metadata.rsi_harness.verifier.gpus) and --gpus gives ${judgeGpus.length}; pass --gpus LIST (e.g. --gpus 0) on a GPU host`,
        );
        return finish();
      }
      try {
        await (o.gpuRuntimeCheck ?? new DockerGpuRuntimeCheck(daemonInfoOf(runtime))).check(judgeGpus);
      } catch (e) {
        set('build', 'failed', (e as Error).message.split('\n')[0] as string);
        return finish();
      }
    }

    log('building images');
    let task: LoadedTask;
    const buildStarted = clock.now().getTime();
    try {
      task = await rt.loadTask(dir, { hostEnv: process.env, ...(needed > 0 ? { gpusFromPool: true } : {}) });
    } catch (e) {
      set('build', 'failed', (e as Error).message.split('\n')[0] as string);
      return finish();
    }
    const p = task.prepared;
    const judgeOptions = needed > 0 ? { gpus: judgeGpus } : {};
    images = { work: task.images.work.id, judge: task.images.judge.id };
    set(
      'build',
      'ok',
      `work ${task.images.work.tag}${task.images.work.built ? ' (built)' : ' (reused)'}, judge ${task.images.judge.tag}${task.images.judge.built ? ' (built)' : ' (reused)'}, ${((clock.now().getTime() - buildStarted) / 1000).toFixed(1)} s`,
    );
    if (!results.has('verifier-interpreters')) set('verifier-interpreters', ...interpreterCheck(dir, p.workdir));
    if (p.rootfs) {
      set('leak-image', 'skipped', 'full-rootfs tasks (workdir "/") are not checked yet');
      return finish();
    }

    log('taking the starting workspace out of the Work image');
    const startDir = join(scratch, 'start');
    const base = containerSpec(task.images.work.id, p.workdir, plan);
    const probe = await runtime.createContainer({ ...base, cmd: ['true'] });
    try {
      set('leak-image', ...(await leakImage(runtime, probe, hidden)));
      await extractDir(runtime, probe, p.workdir, startDir);
    } finally {
      await runtime.removeContainer(probe).catch(() => undefined);
    }

    log('applying the oracle (solution/)');
    stopIfCancelled();
    const oracleDir = join(scratch, 'oracle');
    const oracle = await applyOracle(runtime, base, dir, p.workdir, oracleDir, plan);
    if (oracle.error) {
      set('reward-written', 'failed', `oracle: ${oracle.error}`);
      return finish();
    }

    const judgeAll = async (what: 'start' | 'oracle', path: string): Promise<JudgeOutcome[]> => {
      const cid = await (rt as JudgeRuntime).snapshots.snapshotDirectory(path);
      const out: JudgeOutcome[] = [];
      for (let i = 0; i < repeat; i++) {
        stopIfCancelled();
        log(`judging the ${what} (${i + 1}/${repeat})`);
        out.push(outcome(await (rt as JudgeRuntime).runner.judge(p, cid, {}, judgeOptions)));
      }
      return out;
    };
    judges.start = await judgeAll('start', startDir);
    judges.oracle = await judgeAll('oracle', oracleDir);
    for (const c of judgedChecks({
      start: judges.start,
      oracle: judges.oracle,
      direction: plan.metadata['assay'] && (plan.metadata['assay'] as Record<string, unknown>)['direction'] === 'minimize' ? 'minimize' : 'maximize',
      metric: p.requestedMetric ?? ((plan.metadata['assay'] as Record<string, unknown> | undefined)?.['primary_metric'] as string | undefined) ?? null,
      tolerance,
      verifierTimeoutSec: p.limits.verifierTimeoutSec,
    }))
      results.set(c.name, c);

    const hostileDir = join(scratch, 'hostile');
    const planted = plantWorkspace(startDir, hostileDir);
    if (planted === 0) {
      set('reward-writable', 'skipped', 'no Python or shell file in the starting workspace to plant the attempt in');
    } else {
      stopIfCancelled();
      log('judging a hostile workspace');
      const r = await rt.runner.judge(p, await rt.snapshots.snapshotDirectory(hostileDir), {}, judgeOptions);
      judges.hostile = outcome(r);
      const h = hostileVerdict({ rewards: r.rewards, output: readHead(r.output.path, 1 << 20) });
      set(
        'reward-writable',
        h.wrote ? 'failed' : 'ok',
        h.wrote
          ? `candidate code can write the reward: ${h.how} (run it only through run-as-candidate)`
          : `code planted in ${planted} file(s) of the start could not write /logs/verifier (hostile Judge: ${r.status})`,
      );
    }
    return finish();
  } finally {
    if (rt) await rt.close();
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

function interpreterCheck(dir: string, workdir: string): ['ok' | 'failed', string] {
  const risks = findRootInterpreterRisks(fs.readFileSync(join(dir, 'tests', 'test.sh'), 'utf8'), workdir);
  const r = risks[0];
  if (!r) return ['ok', 'no root interpreter or build tool with the workdir on its path (static scan of tests/test.sh)'];
  return ['failed', `tests/test.sh:${r.line}: ${r.why} (${r.text})${risks.length > 1 ? ` and ${risks.length - 1} more` : ''}`];
}

function outcome(r: JudgeResult): JudgeOutcome {
  return { status: r.status, score: r.primaryScore, durationMs: r.durationMs, detail: r.detail ?? r.rule?.detail ?? null };
}

export function containerSpec(image: string, workdir: string, plan: TaskPlan): Omit<ContainerSpec, 'cmd'> {
  return {
    image,
    env: {},
    workingDir: workdir,
    labels: LABELS,
    mounts: [],
    networkMode: 'none',
    readOnlyRootfs: false,
    capDrop: [],
    capAdd: [],
    noNewPrivileges: true,
    pidsLimit: 1024,
    memoryBytes: plan.environment.memoryMb === null ? null : plan.environment.memoryMb * 1048576,
    nanoCpus: null,
    init: true,
    openStdin: false,
  };
}

/** Files of tests/ and solution/ (at least 32 bytes), by digest: what must not be in the build context or the image. */
function hiddenFiles(dir: string): Map<string, { path: string; size: number }> {
  const out = new Map<string, { path: string; size: number }>();
  for (const part of ['tests', 'solution']) {
    for (const f of walk(join(dir, part))) {
      const b = fs.readFileSync(f);
      if (b.length < MIN_LEAK_BYTES) continue;
      out.set(sha(b), { path: relative(dir, f).split(sep).join('/'), size: b.length });
    }
  }
  return out;
}

function* walk(root: string): Generator<string> {
  let entries: fs.Dirent[];
  try {
    entries = fs.readdirSync(root, { withFileTypes: true });
  } catch {
    return;
  }
  for (const e of entries) {
    const p = join(root, e.name);
    if (e.isDirectory()) yield* walk(p);
    else if (e.isFile()) yield p;
  }
}

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

function leakContext(dir: string, hidden: Map<string, { path: string; size: number }>): ['ok' | 'failed', string] {
  const dockerfile = join(dir, 'environment', 'Dockerfile');
  const lines = fs.existsSync(dockerfile) ? findDockerfileLeaks(fs.readFileSync(dockerfile, 'utf8')) : [];
  if (lines.length) return ['failed', `environment/Dockerfile:${lines[0]?.line}: ${lines[0]?.why}`];
  for (const f of walk(join(dir, 'environment'))) {
    const h = hidden.get(sha(fs.readFileSync(f)));
    if (h) return ['failed', `${relative(dir, f).split(sep).join('/')} is a copy of ${h.path}: the build context (environment/) is visible to the agent`];
  }
  return ['ok', 'environment/ holds no copy of tests/ or solution/, and the Dockerfile copies neither'];
}

async function leakImage(
  runtime: ContainerRuntime,
  container: string,
  hidden: Map<string, { path: string; size: number }>,
): Promise<['ok' | 'failed', string]> {
  const sizes = new Set([...hidden.values()].map((h) => h.size));
  let files = 0;
  for await (const rec of readTar(await runtime.exportContainer(container), {
    maxArchiveBytes: 64 * 2 ** 30,
    keep: (h) => (h.type === 'file' && sizes.has(h.size) ? h.size : false),
  })) {
    files++;
    if (!rec.content) continue;
    const h = hidden.get(sha(rec.content));
    if (h) return ['failed', `/${rec.header.path.replace(/^\.?\//, '')} in the Work image is a copy of ${h.path}`];
  }
  return ['ok', `no file of tests/ or solution/ among the Work image's ${files} entries (by content)`];
}

/** Writes the directory `path` of a (created or stopped) container into dest (also used by `assay baseline`). */
export async function extractDir(runtime: ContainerRuntime, container: string, path: string, dest: string): Promise<void> {
  fs.mkdirSync(dest, { recursive: true, mode: 0o755 });
  const archive = await runtime.readArchive(container, path);
  if (!archive) throw new Error(`${path} does not exist in the Work image`);
  for await (const rec of readTar(archive, { maxArchiveBytes: MAX_ARCHIVE, keep: (h) => (h.type === 'file' ? h.size : false) })) {
    const parts = rec.header.path.split('/').filter((s) => s !== '' && s !== '.');
    if (parts.some((s) => s === '..')) throw new Error(`unsafe path in the workspace archive: ${rec.header.path}`);
    const rel = parts.slice(1); // the archive's top entry is the workdir itself
    if (rel.length === 0) continue;
    const target = join(dest, ...rel);
    fs.mkdirSync(dirname(target), { recursive: true });
    if (rec.header.type === 'dir') fs.mkdirSync(target, { recursive: true, mode: rec.header.mode & 0o777 });
    else if (rec.header.type === 'file') fs.writeFileSync(target, rec.content ?? Buffer.alloc(0), { mode: rec.header.mode & 0o777 });
    else if (rec.header.type === 'symlink') fs.symlinkSync(rec.header.linkTarget, target);
  }
}

/** Harbor's oracle: solution/ at /solution, `bash /solution/solve.sh` in the workdir; then the workdir is taken out (also used by `assay baseline`). */
export async function applyOracle(
  runtime: ContainerRuntime,
  base: Omit<ContainerSpec, 'cmd'>,
  dir: string,
  workdir: string,
  dest: string,
  plan: TaskPlan,
): Promise<{ error: string | null }> {
  const solution = join(dir, 'solution');
  if (!fs.existsSync(solution)) return { error: 'the task has no solution/: nothing to judge as the oracle' };
  const hasSolve = fs.existsSync(join(solution, 'solve.sh'));
  const cmd = hasSolve ? ['bash', '/solution/solve.sh'] : ['bash', '-c', `cp -a /solution/. ${JSON.stringify(workdir)}/`];
  const id = await runtime.createContainer({ ...base, cmd, mounts: [{ type: 'bind', source: solution, target: '/solution', readOnly: true }] });
  try {
    let output = '';
    const started = await runtime.start(id, {
      onOutput: (_s, chunk) => {
        if (output.length < 65536) output += chunk.toString('utf8');
      },
    });
    const timeoutMs = (plan.agent.timeoutSec ?? 600) * 1000;
    const w = await runtime.wait(id, timeoutMs);
    await started.outputEnded.catch(() => undefined);
    if (!w.exited) {
      await runtime.kill(id);
      return { error: `solution/solve.sh ran past ${timeoutMs / 1000} s` };
    }
    if (w.exitCode !== 0) return { error: `solution/solve.sh exited ${w.exitCode}: ${output.trim().split('\n').slice(-2).join(' | ')}` };
    await extractDir(runtime, id, workdir, dest);
    return { error: null };
  } finally {
    await runtime.removeContainer(id).catch(() => undefined);
  }
}

/** Copies the start into dest with the hostile code planted in each Python and shell file; returns how many. */
function plantWorkspace(src: string, dest: string): number {
  fs.cpSync(src, dest, { recursive: true, verbatimSymlinks: true });
  let n = 0;
  for (const f of walk(dest)) {
    const text = fs.readFileSync(f, 'utf8');
    const planted = plantHostile(f, text);
    if (planted === null) continue;
    fs.writeFileSync(f, planted);
    n++;
  }
  return n;
}

function readHead(path: string, max: number): string {
  try {
    const fd = fs.openSync(path, 'r');
    try {
      const b = Buffer.alloc(max);
      const n = fs.readSync(fd, b, 0, max, 0);
      return b.subarray(0, n).toString('utf8');
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    return '';
  }
}
