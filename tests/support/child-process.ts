/** Runs TypeScript files in child processes through tests/support/ts-register.js. */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { resolve } from 'node:path';

export const REPO_ROOT = resolve(__dirname, '..', '..');
export const TS_REGISTER = resolve(__dirname, 'ts-register.js');

/** Starts `node -r ts-register <script> ...args` in the repository root. `script` is relative to the root. */
export function spawnTs(script: string, args: string[]): ChildProcessWithoutNullStreams {
  return spawn(process.execPath, ['-r', TS_REGISTER, resolve(REPO_ROOT, script), ...args], {
    cwd: REPO_ROOT,
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, NODE_OPTIONS: '' },
  });
}

export interface ChildResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Collects a child's output until it exits (or kills it after `timeoutMs`). */
export function finished(child: ChildProcessWithoutNullStreams, timeoutMs = 30_000): Promise<ChildResult> {
  return new Promise((resolvePromise) => {
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolvePromise({ code, signal, stdout, stderr });
    });
  });
}

export function runTs(script: string, args: string[], timeoutMs = 30_000): Promise<ChildResult> {
  return finished(spawnTs(script, args), timeoutMs);
}

/**
 * Calls `fn` once, as soon as what `stream` has written so far contains `marker` (ASCII), however the output is cut
 * into chunks: a marker split across two chunks is still seen, and seen once.
 */
export function onceOutput(stream: NodeJS.ReadableStream, marker: string, fn: () => void): void {
  let tail = '';
  const onData = (d: Buffer | string) => {
    const text = tail + d.toString();
    if (!text.includes(marker)) {
      tail = text.slice(-(marker.length - 1));
      return;
    }
    stream.off('data', onData);
    fn();
  };
  stream.on('data', onData);
}
