/**
 * Reads a task directory from disk, defensively, and compiles it. The directory is attacker-controlled:
 * - required files must be regular files and required directories real directories (a symlink is refused, and
 *   files are opened with O_NOFOLLOW);
 * - every file read is bounded; text must be UTF-8;
 * - the whole tree is walked (bounded) and a symlink whose target leaves its part of the task (environment/, tests/,
 *   solution/, else the task directory) is refused, as are fifos, sockets and device files: tests/ is injected into
 *   the Judge on its own and environment/ is a Docker build context on its own, so links out of them would dangle
 *   or reach outside.
 */
import { constants, promises as fs } from 'node:fs';
import { basename, join, posix, resolve } from 'node:path';
import { AssayError } from '@assay/core';
import { compileTask, INSTRUCTION_MD, TASK_TOML } from './domain/compile-task';
import { COMPOSE_FILE } from './domain/compose';
import type { TaskPlan } from './domain/task-plan';
import { problem, TASK_ERROR_CODES as C, taskInvalidError, type TaskProblem } from './task-format.errors';

export interface TaskDirLimits {
  readonly maxTaskTomlBytes: number;
  readonly maxInstructionBytes: number;
  readonly maxTestScriptBytes: number;
  readonly maxComposeBytes: number;
  /** Files, directories and links in the whole task directory. */
  readonly maxEntries: number;
  readonly maxDepth: number;
}

export const DEFAULT_TASK_DIR_LIMITS: TaskDirLimits = Object.freeze({
  maxTaskTomlBytes: 256 * 1024,
  maxInstructionBytes: 1024 * 1024,
  maxTestScriptBytes: 1024 * 1024,
  maxComposeBytes: 64 * 1024,
  maxEntries: 100_000,
  maxDepth: 64,
});

export const TEST_SCRIPT = 'tests/test.sh';
export const DOCKERFILE = 'environment/Dockerfile';

export interface TaskValidation {
  readonly ok: boolean;
  /** Absolute, resolved task directory. */
  readonly dir: string;
  readonly plan: TaskPlan | null;
  /** Every problem found, file-system problems first. */
  readonly problems: readonly TaskProblem[];
  /** The plan's warnings (TaskPlan.warnings); empty when the task does not validate. */
  readonly warnings: readonly TaskProblem[];
}

export interface TaskDirOptions {
  readonly limits?: Partial<TaskDirLimits>;
}

type Kind = 'file' | 'dir';
type PathState = 'ok' | 'absent' | 'unsafe';

async function checkPath(root: string, rel: string, kind: Kind, problems: TaskProblem[], required: boolean): Promise<PathState> {
  let st;
  try {
    st = await fs.lstat(join(root, rel));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT' || (e as NodeJS.ErrnoException).code === 'ENOTDIR') {
      if (required) problems.push(problem(C.FILE_MISSING, rel, null, `missing: a task needs ${kind === 'dir' ? 'the directory' : 'the file'} ${rel}`));
      return 'absent';
    }
    problems.push(problem(C.FILE_UNSAFE, rel, null, `cannot be inspected: ${(e as Error).message}`));
    return 'unsafe';
  }
  if (st.isSymbolicLink()) {
    problems.push(problem(C.FILE_UNSAFE, rel, null, `is a symlink; ${rel} must be a real ${kind === 'dir' ? 'directory' : 'file'} inside the task directory`));
    return 'unsafe';
  }
  if (kind === 'dir' ? !st.isDirectory() : !st.isFile()) {
    problems.push(problem(C.FILE_UNSAFE, rel, null, `expected a ${kind === 'dir' ? 'directory' : 'regular file'}`));
    return 'unsafe';
  }
  return 'ok';
}

export type BoundedRead = { ok: true; bytes: Buffer } | { ok: false; problem: TaskProblem };

/** Reads a regular file without following a symlink at the last component, refusing more than `limit` bytes. */
export async function readBoundedFile(root: string, rel: string, limit: number): Promise<BoundedRead> {
  let handle;
  try {
    handle = await fs.open(join(root, rel), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return { ok: false, problem: problem(C.FILE_MISSING, rel, null, 'missing') };
    if (code === 'ELOOP') return { ok: false, problem: problem(C.FILE_UNSAFE, rel, null, 'is a symlink; expected a regular file') };
    return { ok: false, problem: problem(C.FILE_UNSAFE, rel, null, `cannot be opened: ${(e as Error).message}`) };
  }
  try {
    const st = await handle.stat();
    if (!st.isFile()) return { ok: false, problem: problem(C.FILE_UNSAFE, rel, null, 'expected a regular file') };
    if (st.size > limit) {
      return { ok: false, problem: problem(C.FILE_TOO_LARGE, rel, null, `${st.size} bytes; at most ${limit} bytes are read`) };
    }
    const buf = Buffer.alloc(limit + 1);
    let n = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buf, n, buf.length - n, n);
      if (bytesRead === 0) break;
      n += bytesRead;
      if (n > limit) return { ok: false, problem: problem(C.FILE_TOO_LARGE, rel, null, `grew past ${limit} bytes while being read`) };
    }
    return { ok: true, bytes: buf.subarray(0, n) };
  } finally {
    await handle.close();
  }
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });
const LENIENT_UTF8 = new TextDecoder('utf-8');

function decodeText(bytes: Buffer, rel: string): { ok: true; text: string } | { ok: false; problem: TaskProblem } {
  try {
    const text = UTF8.decode(bytes);
    return { ok: true, text: text.startsWith('\ufeff') ? text.slice(1) : text };
  } catch {
    return { ok: false, problem: problem(C.FILE_ENCODING, rel, null, 'is not valid UTF-8') };
  }
}

async function readText(root: string, rel: string, limit: number, problems: TaskProblem[]): Promise<string | undefined> {
  const r = await readBoundedFile(root, rel, limit);
  if (!r.ok) {
    problems.push(r.problem);
    return undefined;
  }
  const d = decodeText(r.bytes, rel);
  if (!d.ok) {
    problems.push(d.problem);
    return undefined;
  }
  return d.text;
}

const SCOPES = ['environment', 'tests', 'solution'];
const MAX_REPORTED_PER_KIND = 20;

/** Walks the tree (never following links), reporting escaping symlinks, special files, and size bounds. */
async function walkTree(root: string, limits: TaskDirLimits, problems: TaskProblem[]): Promise<void> {
  let entries = 0;
  const reported = { link: 0, special: 0 };
  const report = (kind: 'link' | 'special', p: TaskProblem) => {
    reported[kind] += 1;
    if (reported[kind] <= MAX_REPORTED_PER_KIND) problems.push(p);
  };
  const stack: { rel: string; depth: number }[] = [{ rel: '', depth: 0 }];
  while (stack.length > 0) {
    const { rel, depth } = stack.pop() as { rel: string; depth: number };
    let dirents;
    try {
      dirents = await fs.readdir(join(root, rel), { withFileTypes: true });
    } catch (e) {
      problems.push(problem(C.FILE_UNSAFE, rel === '' ? '.' : rel, null, `cannot be listed: ${(e as Error).message}`));
      continue;
    }
    for (const d of dirents) {
      entries += 1;
      if (entries > limits.maxEntries) {
        problems.push(problem(C.FILE_TOO_LARGE, '.', null, `more than ${limits.maxEntries} entries in the task directory`));
        return;
      }
      const childRel = rel === '' ? d.name : `${rel}/${d.name}`;
      if (d.isSymbolicLink()) {
        let target: string;
        try {
          target = await fs.readlink(join(root, childRel));
        } catch (e) {
          report('link', problem(C.FILE_UNSAFE, childRel, null, `symlink cannot be read: ${(e as Error).message}`));
          continue;
        }
        const top = childRel.split('/')[0] as string;
        const scope = SCOPES.includes(top) && childRel !== top ? top : '';
        const resolved = posix.normalize(posix.join(rel === '' ? '.' : rel, target));
        const inside =
          !posix.isAbsolute(target) &&
          resolved !== '..' &&
          !resolved.startsWith('../') &&
          (scope === '' || resolved === scope || resolved.startsWith(`${scope}/`));
        if (!inside) {
          const where = scope === '' ? 'the task directory' : `${scope}/`;
          report('link', problem(C.FILE_UNSAFE, childRel, null, `symlink to ${JSON.stringify(target)} leaves ${where}; links must stay inside it`));
        }
      } else if (d.isDirectory()) {
        if (depth + 1 > limits.maxDepth) {
          problems.push(problem(C.FILE_TOO_LARGE, childRel, null, `nested deeper than ${limits.maxDepth} directories`));
          continue;
        }
        stack.push({ rel: childRel, depth: depth + 1 });
      } else if (!d.isFile()) {
        report('special', problem(C.FILE_UNSAFE, childRel, null, 'is a fifo, socket or device file; only regular files, directories and links are allowed'));
      }
    }
  }
  for (const kind of ['link', 'special'] as const) {
    if (reported[kind] > MAX_REPORTED_PER_KIND) {
      problems.push(
        problem(C.FILE_UNSAFE, '.', null, `${reported[kind] - MAX_REPORTED_PER_KIND} more unsafe ${kind === 'link' ? 'symlinks' : 'special files'} not listed`),
      );
    }
  }
}

/** Validates a task directory and reports every problem found (never throws for problems in the task). */
export async function validateTaskDir(dir: string, options: TaskDirOptions = {}): Promise<TaskValidation> {
  const limits: TaskDirLimits = { ...DEFAULT_TASK_DIR_LIMITS, ...(options.limits ?? {}) };
  const problems: TaskProblem[] = [];
  let root: string;
  try {
    root = await fs.realpath(resolve(dir));
    if (!(await fs.stat(root)).isDirectory()) throw Object.assign(new Error('not a directory'), { code: 'ENOTDIR' });
  } catch (e) {
    const why = (e as NodeJS.ErrnoException).code === 'ENOTDIR' ? 'is not a directory' : 'does not exist or cannot be read';
    const abs = resolve(dir);
    return { ok: false, dir: abs, plan: null, problems: [problem(C.DIR_NOT_FOUND, abs, null, `the task directory ${why}`)], warnings: [] };
  }

  const tomlState = await checkPath(root, TASK_TOML, 'file', problems, true);
  const instrState = await checkPath(root, INSTRUCTION_MD, 'file', problems, true);
  const envState = await checkPath(root, 'environment', 'dir', problems, true);
  const testsState = await checkPath(root, 'tests', 'dir', problems, true);
  const solutionState = await checkPath(root, 'solution', 'dir', problems, false);
  const dockerfileState = envState === 'ok' ? await checkPath(root, DOCKERFILE, 'file', problems, false) : 'absent';
  const composeState = envState === 'ok' ? await checkPath(root, COMPOSE_FILE, 'file', problems, false) : 'absent';
  let testScript: string | null = null;
  if (testsState === 'ok' && (await checkPath(root, TEST_SCRIPT, 'file', problems, true)) === 'ok') {
    const r = await readBoundedFile(root, TEST_SCRIPT, limits.maxTestScriptBytes);
    if (!r.ok) problems.push(r.problem);
    else if (r.bytes.length === 0)
      problems.push(problem(C.INVALID_VALUE, TEST_SCRIPT, null, 'is empty; it must write /logs/verifier/reward.json or reward.txt'));
    // Read only for warnings (a script that downloads tools while the Judge has no network), so decoded leniently.
    else testScript = LENIENT_UTF8.decode(r.bytes);
  }
  await walkTree(root, limits, problems);

  const taskToml = tomlState === 'ok' ? await readText(root, TASK_TOML, limits.maxTaskTomlBytes, problems) : undefined;
  const instruction = instrState === 'ok' ? await readText(root, INSTRUCTION_MD, limits.maxInstructionBytes, problems) : undefined;
  const compose = composeState === 'ok' ? await readText(root, COMPOSE_FILE, limits.maxComposeBytes, problems) : undefined;

  if (taskToml === undefined) return { ok: false, dir: root, plan: null, problems, warnings: [] };
  const result = compileTask({
    dirName: basename(root),
    taskToml,
    // A missing or unreadable instruction is already reported; compile the rest with a placeholder.
    instruction: instruction ?? '(unreadable)',
    // When environment/ itself is missing or unsafe that is already reported; do not also report its Dockerfile.
    hasDockerfile: dockerfileState !== 'absent' || envState !== 'ok',
    hasSolution: solutionState === 'ok',
    compose: compose ?? null,
    testScript,
  });
  const all = [...problems, ...result.problems];
  if (all.length > 0 || !result.ok) return { ok: false, dir: root, plan: null, problems: all, warnings: [] };
  return { ok: true, dir: root, plan: result.plan, problems: [], warnings: result.plan.warnings };
}

/** Loads a task's plan, or throws TASK_DIR_NOT_FOUND / TASK_INVALID (whose details list every problem). */
export async function loadTaskPlan(dir: string, options: TaskDirOptions = {}): Promise<TaskPlan> {
  const v = await validateTaskDir(dir, options);
  if (v.ok && v.plan) return v.plan;
  const first = v.problems[0];
  if (v.problems.length === 1 && first?.code === C.DIR_NOT_FOUND) {
    throw new AssayError(C.DIR_NOT_FOUND, 'not_found', `${first.file}: ${first.message}`, { details: { dir: first.file } });
  }
  throw taskInvalidError(v.dir, v.problems);
}
