/**
 * Digests of a task: the whole directory, instruction.md, tests/ and environment/. Directories go through the
 * injected DirectoryDigester (the snapshot lib's content addressing); instruction.md is one file and is digested
 * here as `sha256:<hex>` of its exact bytes (read without following links, bounded like the validator's read).
 * Validate the directory (validateTaskDir / loadTaskPlan) before digesting it.
 */
import { createHash } from 'node:crypto';
import { join, resolve } from 'node:path';
import { AssayError, isAssayError } from '@assay/core';
import { INSTRUCTION_MD } from './domain/compile-task';
import type { DirectoryDigester } from './ports/directory-digester.port';
import { TASK_ERROR_CODES as C, formatProblem } from './task-format.errors';
import { DEFAULT_TASK_DIR_LIMITS, readBoundedFile } from './task-dir';

export interface TaskDigests {
  /** The whole task directory (what the protocol fingerprint names). */
  readonly task: string;
  /** `sha256:<hex>` of instruction.md's bytes. */
  readonly instruction: string;
  /** tests/: the hidden tests the Judge injects. */
  readonly tests: string;
  /** environment/: the image's build context. */
  readonly environment: string;
}

async function digestDir(hasher: DirectoryDigester, dir: string, what: string): Promise<string> {
  try {
    const d = await hasher.digest(dir);
    if (typeof d !== 'string' || d.length === 0) throw new Error('the digester returned no digest');
    return d;
  } catch (e) {
    if (isAssayError(e)) throw e;
    throw new AssayError(C.DIGEST_FAILED, 'internal', `cannot digest ${what} (${dir}): ${e instanceof Error ? e.message : String(e)}`, {
      cause: e,
      details: { dir },
    });
  }
}

export async function computeTaskDigests(dir: string, hasher: DirectoryDigester): Promise<TaskDigests> {
  const root = resolve(dir);
  const read = await readBoundedFile(root, INSTRUCTION_MD, DEFAULT_TASK_DIR_LIMITS.maxInstructionBytes);
  if (!read.ok) {
    throw new AssayError(read.problem.code, 'invalid_input', `${root}: ${formatProblem(read.problem)}`, { details: { dir: root } });
  }
  const instruction = `sha256:${createHash('sha256').update(read.bytes).digest('hex')}`;
  const task = await digestDir(hasher, root, 'the task directory');
  const tests = await digestDir(hasher, join(root, 'tests'), 'tests/');
  const environment = await digestDir(hasher, join(root, 'environment'), 'environment/');
  return Object.freeze({ task, instruction, tests, environment });
}
