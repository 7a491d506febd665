import { spawn } from 'node:child_process';
import { REPO_ROOT, TS_REGISTER, finished, type ChildResult } from './child-process';

/** Runs the `assay` CLI from its TypeScript sources in a child process, with ASSAY_HOME set. */
export function assay(args: string[], home: string, timeoutMs = 60_000): Promise<ChildResult> {
  const child = spawn(process.execPath, ['-r', TS_REGISTER, 'apps/cli/src/main.ts', ...args], {
    cwd: REPO_ROOT,
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, NODE_OPTIONS: '', ASSAY_HOME: home },
  });
  child.stdin.end();
  return finished(child, timeoutMs);
}
