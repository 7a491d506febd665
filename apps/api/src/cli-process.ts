/**
 * Long work the API hands to the CLI (a run, a re-judging): `assay <args>` started as a detached program of its own,
 * with this process's Node options and ASSAY_HOME, never imported (the CLI is its own app). It outlives a restart of
 * the API; what it prints goes to files the caller names.
 */
import { spawn } from 'node:child_process';
import { closeSync, lstatSync, openSync } from 'node:fs';
import { extname, join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import { AssayError, type Clock } from '@assay/core';
import type { ApiConfig } from './app.tokens';

/** Task directory names the API takes: one component, never a path. */
export const TASK_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/**
 * A task directory of the server's ASSAY_API_TASKS_DIR, by name: task directories are chosen by whoever runs the
 * server, never by a caller's path. Without ASSAY_API_TASKS_DIR the route is off (403 `disabledCode`).
 */
export function serverTaskDir(config: ApiConfig, task: string, disabledCode: string, what: string, route: string): string {
  const tasks = config.env.ASSAY_API_TASKS_DIR;
  if (!tasks)
    throw new AssayError(disabledCode, 'refused', `this API ${what}: start it with ASSAY_API_TASKS_DIR=<a directory of task directories> to allow ${route}`);
  if (!TASK_NAME.test(task))
    throw new AssayError('TASK_NOT_FOUND', 'not_found', 'a task is a directory name: 1-128 characters [A-Za-z0-9._-], not starting with . or -', {
      details: { task: task.slice(0, 128) },
    });
  const dir = join(resolve(tasks), task);
  let st;
  try {
    st = lstatSync(dir);
  } catch {
    throw new AssayError('TASK_NOT_FOUND', 'not_found', `no task ${task} in the server's task directory`, { details: { task } });
  }
  if (!st.isDirectory())
    throw new AssayError('TASK_NOT_FOUND', 'not_found', `${task} in the server's task directory is not a directory`, { details: { task } });
  return dir;
}

/**
 * An id for something the API starts (a run, a re-judging): `<prefix>-<YYYYMMDD of the clock's today>-<8 random hex>`,
 * as `assay run` and `assay rejudge` name theirs.
 */
export function datedId(prefix: string, clock: Clock): string {
  return `${prefix}-${clock.now().toISOString().slice(0, 10).replace(/-/g, '')}-${randomBytes(4).toString('hex')}`;
}

/** The CLI's entry point next to this app (main.ts under ts-node and jest, main.js when built). */
export function cliEntry(): string {
  return join(__dirname, '..', '..', 'cli', 'src', `main${extname(__filename)}`);
}

export interface CliLaunch {
  readonly home: string;
  /** Where stdout goes (appended, mode 0600); stderr too unless `stderr` is given. */
  readonly stdout: string;
  readonly stderr?: string;
  /** NODE_OPTIONS of the child (ASSAY_API_RUN_NODE_OPTIONS), none by default. */
  readonly nodeOptions?: string;
  /** A file that receives the exit status (a decimal line) once the CLI has ended, written by a shell around it. */
  readonly exitStatus?: string;
}

/** Starts `assay <args>` detached; answers its pid (of the shell around it when `exitStatus` is asked for). */
export function startCli(args: readonly string[], o: CliLaunch): { pid: number | null } {
  const argv = [...process.execArgv, cliEntry(), ...args];
  const out = openSync(o.stdout, 'a', 0o600);
  const err = o.stderr ? openSync(o.stderr, 'a', 0o600) : out;
  try {
    const env = { ...process.env, ASSAY_HOME: o.home, NODE_OPTIONS: o.nodeOptions ?? '' };
    // With exitStatus: sh runs the CLI, then writes its status next to the output (atomically: a rename), so the
    // status survives the API going away meanwhile. The paths and arguments travel as sh's own arguments, never as
    // text of the script.
    const child = o.exitStatus
      ? spawn(
          '/bin/sh',
          ['-c', '"$@"; s=$?; printf "%s\\n" "$s" > "$ASSAY_EXIT_FILE.tmp" && mv "$ASSAY_EXIT_FILE.tmp" "$ASSAY_EXIT_FILE"', 'sh', process.execPath, ...argv],
          {
            detached: true,
            stdio: ['ignore', out, err],
            env: { ...env, ASSAY_EXIT_FILE: o.exitStatus },
          },
        )
      : spawn(process.execPath, argv, { detached: true, stdio: ['ignore', out, err], env });
    child.unref();
    return { pid: child.pid ?? null };
  } finally {
    closeSync(out);
    if (err !== out) closeSync(err);
  }
}
