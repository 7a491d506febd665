/**
 * `assay tokens` and `assay serve` from the command line (a child process each): tokens are printed once and stored
 * only as their SHA-256 in a 0600 table; list never shows a token; revoke refuses unknown ids; `assay serve` starts
 * the API on the home and stops on Ctrl-C.
 */
import { spawn } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { REPO_ROOT, TS_REGISTER } from '../support/child-process';
import { assay } from '../support/cli';
import { makeTmpDir, waitFor } from '../support/ledger-fixtures';
import { homeWith, preamble, sampleVariant } from '../projections/projection-fixtures';

jest.setTimeout(120_000);

let tmp: { dir: string; cleanup(): void };
let home: string;

beforeAll(async () => {
  tmp = makeTmpDir('assay-api-cli-');
  home = join(tmp.dir, 'home');
  await homeWith(home, [...preamble(), ...sampleVariant({ run: 'r-a' })]);
});
afterAll(() => tmp.cleanup());

describe('assay tokens', () => {
  it('creates, lists and revokes role tokens; only hashes are stored', async () => {
    const created = await assay(['tokens', 'create', '--role', 'operator', '--name', 'ci runner'], home);
    expect(created.code).toBe(0);
    const token = created.stdout.trim();
    expect(token).toMatch(/^assay-tk-[A-Za-z0-9_-]{43}$/);
    expect(created.stderr).toMatch(/only time the token is shown/);
    const db = join(home, 'api', 'tokens.db');
    expect(statSync(db).mode & 0o777).toBe(0o600);
    expect(statSync(join(home, 'api')).mode & 0o777).toBe(0o700);
    expect(readFileSync(db).includes(Buffer.from(token))).toBe(false);

    const list = await assay(['tokens', 'list', '--json'], home);
    expect(list.code).toBe(0);
    const tokens = (JSON.parse(list.stdout) as { tokens: Array<{ id: string; role: string; name: string; revokedAt: string | null }> }).tokens;
    expect(tokens).toEqual([expect.objectContaining({ role: 'operator', name: 'ci runner', revokedAt: null })]);
    expect(list.stdout).not.toContain(token);

    const revoked = await assay(['tokens', 'revoke', tokens[0]!.id], home);
    expect(revoked.code).toBe(0);
    expect(revoked.stdout).toMatch(new RegExp(`^revoked ${tokens[0]!.id} \\(operator\\)`));
    expect((await assay(['tokens', 'list'], home)).stdout).toMatch(/operator .* revoked /);
  });

  it('refuses a bad role (exit 2), a bad name (exit 2) and an unknown id (exit 3), without a stack trace', async () => {
    const role = await assay(['tokens', 'create', '--role', 'root'], home);
    expect(role.code).toBe(2);
    expect(role.stderr).toMatch(/--role must be one of admin, operator, auditor, reader/);
    const name = await assay(['tokens', 'create', '--role', 'reader', '--name', '\u001b[31mred'], home);
    expect(name.code).toBe(2);
    expect(name.stderr).toMatch(/API_TOKEN_BAD_NAME/);
    expect(name.stderr).not.toContain('\u001b[31m');
    const unknown = await assay(['tokens', 'revoke', 'tk_0123456789abcdef'], home);
    expect(unknown.code).toBe(3);
    expect(unknown.stderr).toMatch(/API_TOKEN_NOT_FOUND/);
    for (const r of [role, name, unknown]) expect(r.stderr).not.toMatch(/\n\s+at /);
  });
});

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

/**
 * `assay serve --port PORT [...extra]` as a child process, once it listens: with --json when it printed its line on
 * stdout, else when it printed `assay api on` on stderr. Its output so far, and its exit (status and signal).
 */
async function serveOn(port: number, extra: string[] = []) {
  const child = spawn(process.execPath, ['-r', TS_REGISTER, 'apps/cli/src/main.ts', 'serve', '--port', String(port), ...extra], {
    cwd: REPO_ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, NODE_OPTIONS: '', ASSAY_HOME: home },
  });
  const out = { stdout: '', stderr: '' };
  child.stdout.on('data', (d: Buffer) => (out.stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out.stderr += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => child.on('exit', (code, signal) => r({ code, signal })));
  const listening = () => (extra.includes('--json') ? out.stdout.includes('\n') : out.stderr.includes('assay api on'));
  const deadline = Date.now() + 60_000;
  while (!listening() && child.exitCode === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  return { child, out, exited };
}

describe('assay serve', () => {
  it('serves the API, the pages and the OpenAPI document on the home, and stops on SIGINT', async () => {
    const port = await freePort();
    const { child, out, exited } = await serveOn(port);
    try {
      expect(out.stderr).toContain(`assay api on http://127.0.0.1:${port}`);
      const base = `http://127.0.0.1:${port}`;
      expect(((await (await fetch(`${base}/tasks`)).json()) as { tasks: unknown[] }).tasks).toEqual([{ task: 'tiny-optimizer', runs: 1, imported: 0 }]);
      expect((await fetch(`${base}/ui/leaderboard.html`)).status).toBe(200);
      expect((await fetch(`${base}/api/docs/openapi.json`)).status).toBe(200);
      // One JSON access line per request, with the request id and route, never a token.
      await waitFor(() => out.stderr.includes('"path":"/tasks"'), 30_000, 'the access line of GET /tasks');
      const access = out.stderr
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(access).toEqual(expect.arrayContaining([expect.objectContaining({ level: 'info', method: 'GET', path: '/tasks', route: '/tasks', status: 200 })]));
    } finally {
      child.kill('SIGINT');
    }
    expect((await exited).code).toBe(0);
  });

  it('--json prints one line with the addresses once listening', async () => {
    const port = await freePort();
    const { child, out, exited } = await serveOn(port, ['--json']);
    try {
      expect(JSON.parse(out.stdout.split('\n')[0]!)).toEqual({
        url: `http://127.0.0.1:${port}`,
        ui: `http://127.0.0.1:${port}/ui/`,
        docs: `http://127.0.0.1:${port}/api/docs`,
        home,
        reads: 'open',
        writes: expect.stringMatching(/^(tokens|none \(no API token\))$/),
      });
    } finally {
      child.kill('SIGINT');
    }
    expect((await exited).code).toBe(0);
  });

  it('the API ends with `assay serve` even when that is SIGKILLed (no orphaned server)', async () => {
    const port = await freePort();
    const { child, exited } = await serveOn(port, ['--json']);
    expect((await fetch(`http://127.0.0.1:${port}/health/live`)).status).toBe(200);
    child.kill('SIGKILL');
    expect((await exited).signal).toBe('SIGKILL');
    let up = true;
    for (let i = 0; i < 100 && up; i++) {
      await new Promise((r) => setTimeout(r, 100));
      up = await fetch(`http://127.0.0.1:${port}/health/live`).then(
        () => true,
        () => false,
      );
    }
    expect(up).toBe(false);
  });

  it("refuses a bad --reads, --port or --host with exit 2, and a port in use with the API's own error and exit 7", async () => {
    const r = await assay(['serve', '--reads', 'maybe'], home);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--reads must be "open" or "token"/);
    const port = await assay(['serve', '--port', '0x10'], home);
    expect([port.code, port.stderr]).toEqual([2, expect.stringMatching(/--port must be an integer 1-65535, got "0x10"/)]);
    const host = await assay(['serve', '--host', 'a b'], home);
    expect([host.code, host.stderr]).toEqual([2, expect.stringMatching(/--host must be a host name or an IP address/)]);
    const busy = createServer();
    await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r));
    try {
      const taken = await assay(['serve', '--port', String((busy.address() as { port: number }).port)], home);
      expect(taken.code).toBe(7);
      expect(taken.stderr).toMatch(/API_PORT_IN_USE/);
      expect(taken.stderr).toMatch(/API_SERVER_EXITED: the API process exited with status 7/);
      expect(taken.stderr).not.toMatch(/\n\s+at /);
    } finally {
      await new Promise((r) => busy.close(r));
    }
  });
});
