import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { silentProgress, type Clock } from '@assay/core';
import { runCli } from '../../apps/cli/src/main';
import type { CliContext } from '../../apps/cli/src/cli-context';
import { REPO_ROOT, TS_REGISTER, finished, type ChildResult } from './child-process';

/**
 * Starts the `assay` CLI from its TypeScript sources in a child process in the repository root, with ASSAY_HOME set
 * and its stdin closed: for a test that needs the process itself (to signal it, to watch its output as it comes).
 */
export function spawnAssay(args: string[], home: string): ChildProcessWithoutNullStreams {
  const child = spawn(process.execPath, ['-r', TS_REGISTER, 'apps/cli/src/main.ts', ...args], {
    cwd: REPO_ROOT,
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, NODE_OPTIONS: '', ASSAY_HOME: home },
  });
  child.stdin.end();
  return child;
}

/** Runs the `assay` CLI from its TypeScript sources in a child process, with ASSAY_HOME set (spawnAssay), to its end. */
export function assay(args: string[], home: string, timeoutMs = 60_000): Promise<ChildResult> {
  return finished(spawnAssay(args, home), timeoutMs);
}

/**
 * Runs the `assay` CLI in this process (runCli with a capturing context, no progress), with `home` as ASSAY_HOME and
 * `clock` as the context's clock (the system's when absent).
 */
export async function assayInProcess(args: string[], home: string, clock?: Clock): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const ctx: CliContext = { home, out: (t) => void out.push(t), err: (t) => void err.push(t), progress: () => silentProgress, ...(clock ? { clock } : {}) };
  const code = await runCli(args, ctx);
  process.exitCode = 0;
  return { code, out: out.join('\n'), err: err.join('\n') };
}
