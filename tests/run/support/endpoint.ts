/**
 * Test helpers for the submission endpoint: run rsi-submit (python3, as inside Work) and raw HTTP requests over
 * a Unix socket.
 */
import { execFile } from 'node:child_process';
import * as http from 'node:http';
import { join } from 'node:path';

export const RSI_SUBMIT = join(__dirname, '../../../task-runtime/rsi-submit/rsi-submit');

export interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs rsi-submit with only the environment given (plus PATH), as the agent would inside Work. */
export function rsiSubmit(env: Record<string, string>, args: string[] = [], timeoutMs = 60_000): Promise<Ran> {
  return new Promise((resolve) => {
    execFile(
      'python3',
      ['-I', RSI_SUBMIT, ...args],
      { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env }, timeout: timeoutMs },
      (err, stdout, stderr) => {
        const code = err
          ? typeof (err as NodeJS.ErrnoException & { code?: unknown }).code === 'number'
            ? (err as unknown as { code: number }).code
            : null
          : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

export interface Raw {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export function raw(
  socketPath: string,
  o: { method?: string; path?: string; headers?: http.OutgoingHttpHeaders; body?: string; rawHeaders?: Array<[string, string]> } = {},
): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, method: o.method ?? 'POST', path: o.path ?? '/submit', headers: o.headers ?? {} }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    for (const [k, v] of o.rawHeaders ?? []) req.appendHeader(k, v);
    req.on('error', reject);
    if (o.body !== undefined) req.write(o.body);
    req.end();
  });
}
