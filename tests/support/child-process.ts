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
 * Calls `fn` once, as soon as a child's output shows `marker`, however the output is cut into chunks: a marker split
 * across two chunks is still seen, and `fn` runs once however often the marker comes again.
 * - a string marker is looked for anywhere in what `stream` has written so far (ASCII);
 * - a RegExp marker is tested against each whole line (without its newline) of each stream in `streams`: a line is
 *   tested once its newline has arrived, so a line cut mid-way is never matched by its first part, and a stream's
 *   line is never joined with another stream's output.
 */
export function onceOutput(streams: NodeJS.ReadableStream | NodeJS.ReadableStream[], marker: string | RegExp, fn: () => void): void {
  const all = Array.isArray(streams) ? streams : [streams];
  const listeners = new Map<NodeJS.ReadableStream, (d: Buffer | string) => void>();
  const fire = () => {
    for (const [stream, listener] of listeners) stream.off('data', listener);
    listeners.clear();
    fn();
  };
  for (const stream of all) {
    let rest = ''; // a string marker: the last marker.length - 1 characters; a RegExp: the line not yet ended
    const onData = (d: Buffer | string) => {
      const text = rest + d.toString();
      if (typeof marker === 'string') {
        if (text.includes(marker)) return fire();
        rest = text.slice(-(marker.length - 1));
        return;
      }
      const lines = text.split('\n');
      rest = lines.pop() ?? '';
      if (lines.some((line) => marker.test(line))) fire();
    };
    listeners.set(stream, onData);
    stream.on('data', onData);
  }
}
