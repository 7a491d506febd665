/**
 * Every user mistake a new user made with the README and docs alone is one line naming what and where, with the
 * documented exit code (docs/cli.md, "Exit codes"); never a stack trace (exit 70), never a hang.
 */
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { silentProgress } from '@assay/core';
import { runCli } from '../../apps/cli/src/main';
import { assay } from '../support/cli';
import { REPO_ROOT, TS_REGISTER, finished, type ChildResult } from '../support/child-process';
import { scratchDirs } from '../support/scratch';

const TASK = join(REPO_ROOT, 'examples/tasks/tiny-optimizer');
const tmp = scratchDirs('assay-cli-errors-');

/** One line on stderr, `assay: error <CODE>: <message>`, nothing that looks like a stack. */
function expectOneLine(r: ChildResult, exit: number, code: string | RegExp, message: RegExp): void {
  // a usage error may add commander's suggestion on a second line, "(Did you mean ...?)"
  const lines = r.stderr
    .trimEnd()
    .split('\n')
    .filter((l) => !/^\(Did you mean .*\?\)$/.test(l));
  expect({ exit: r.code, lines: lines.length }).toEqual({ exit, lines: 1 });
  const m = /^assay: error ([A-Z0-9_]+): (.*)$/.exec(lines[0] ?? '');
  expect(m).not.toBeNull();
  if (typeof code === 'string') expect(m?.[1]).toBe(code);
  else expect(m?.[1]).toMatch(code);
  expect(m?.[2]).toMatch(message);
  expect(r.stderr).not.toMatch(/\n\s+at |internal error/);
}

describe('assay run: bad flags are usage errors (exit 2), before anything starts', () => {
  const home = () => tmp.fresh('home');
  it.each([
    [[], /assay run needs TASK_DIR/],
    [[TASK, '--max-submissions', 'abc'], /--max-submissions must be a non-negative integer, got "abc"/],
    [[TASK, '--time-budget', '-5'], /--time-budget must be a non-negative integer, got "-5"/],
    [[TASK, '--score-direction', 'up'], /--score-direction must be maximize or minimize, got "up"/],
    [[TASK, '--cooldown', 'abc'], /--cooldown must be a non-negative integer, got "abc"/],
    [[TASK, '--snapshot-interval', '-1'], /--snapshot-interval must be a non-negative integer, got "-1"/],
    [[TASK, '--run-id', '../x'], /--run-id must be lowercase letters, digits and dashes, got "\.\.\/x"/],
    [[TASK, '--max-submissions', '1e3'], /--max-submissions must be a non-negative integer, got "1e3"/],
  ])('run %j', async (args, message) => {
    const h = home();
    const r = await assay(['run', ...(args as string[])], h);
    expectOneLine(r, 2, 'CLI_USAGE', message as RegExp);
    expect(existsSync(h)).toBe(false); // nothing was created for a refused command
  });
});

describe('paths the caller gives', () => {
  it('keys generate into a directory that cannot be created names it (and /proc does not hang)', async () => {
    for (const dir of ['/sys/nope', '/proc/nope']) {
      const r = await assay(['keys', 'generate', '--role', 'auditor', '-o', dir], tmp.fresh('home'), 20_000);
      expect(r.signal).toBeNull();
      expectOneLine(r, r.code ?? -1, /^IO_E[A-Z]+$/, new RegExp(`cannot create directory ${dir}: `));
      expect([2, 3, 6]).toContain(r.code);
    }
  });

  it('ledger init when ASSAY_HOME is a file', async () => {
    const file = join(tmp.base, 'home-is-a-file');
    writeFileSync(file, 'x');
    const r = await assay(['ledger', 'init'], file);
    expectOneLine(r, 2, /^IO_E(NOTDIR|EXIST)$/, new RegExp(file.replace(/[/.]/g, '\\$&')));
  });

  it('snapshot export into a missing directory names the file, and read commands create no store', async () => {
    const h = tmp.fresh('home');
    const r0 = await assay(['snapshot', 'pins'], h);
    expectOneLine(r0, 3, 'SNAPSHOT_STORE_NOT_FOUND', /no snapshot store in .*blobs/);
    expect(existsSync(h)).toBe(false);
    const ws = tmp.fresh('ws');
    mkdirSync(ws);
    writeFileSync(join(ws, 'a.txt'), 'a');
    const created = await assay(['snapshot', 'create', ws, '--json'], h);
    expect(created.code).toBe(0);
    const cid = (JSON.parse(created.stdout) as { rootCid: string }).rootCid;
    // in this process: the CAR writer is ESM-only, which jest's transform serves and the TypeScript child loader does not
    const err: string[] = [];
    const ctx = { home: h, out: () => undefined, err: (t: string) => void err.push(t), progress: () => silentProgress };
    const code = await runCli(['snapshot', 'export', cid, '-o', '/missing/dir/x.car'], ctx);
    expectOneLine(
      { code, signal: null, stdout: '', stderr: err.join('\n') },
      3,
      'SNAPSHOT_OUTPUT_DIR_MISSING',
      /cannot write \/missing\/dir\/x\.car: the directory \/missing\/dir does not exist/,
    );
  });

  it("a CID that is not one says what a CID looks like, not the decoder library's words", async () => {
    const r = await assay(['snapshot', 'verify', 'notacid'], tmp.fresh('home'));
    expectOneLine(r, 2, 'SNAPSHOT_CID_INVALID', /"notacid" is not a CID: expected a base32 CIDv1/);
    expect(r.stderr).not.toMatch(/multibase|decoder/);
  });

  it('a home the caller may not write: one line, no stack (run --resume, ledger append)', async () => {
    const h = tmp.fresh('home');
    expect((await assay(['ledger', 'init'], h)).code).toBe(0);
    // as root, permissions do not stop the writer: run the command as nobody instead, over a home it may only read
    const asNobody = process.getuid?.() === 0;
    chmodSync(tmp.base, 0o755);
    chmodSync(h, 0o755);
    for (const d of readdirSync(h)) chmodSync(join(h, d), 0o755);
    if (!asNobody) for (const d of [h, ...readdirSync(h).map((x) => join(h, x))]) chmodSync(d, 0o555);
    for (const args of [
      ['run', '--resume', 'some-run'],
      ['ledger', 'append', '--stream', 'note-x', '--type', 'Note', '--data', '{"text":"hi"}'],
    ]) {
      const child = spawn(process.execPath, ['-r', TS_REGISTER, 'apps/cli/src/main.ts', ...args], {
        cwd: REPO_ROOT,
        stdio: ['pipe', 'pipe', 'pipe'],
        env: { ...process.env, NODE_OPTIONS: '', ASSAY_HOME: h, HOME: '/tmp' },
        ...(asNobody ? { uid: 65534, gid: 65534 } : {}),
      });
      child.stdin.end();
      const r = await finished(child, 60_000);
      expect(r.code).not.toBe(70);
      expect(r.code).not.toBe(0);
      expect(r.stderr.trimEnd().split('\n')).toHaveLength(1);
      expect(r.stderr).toMatch(/^assay: error [A-Z0-9_]+: /);
      expect(r.stderr).not.toMatch(/\n\s+at /);
    }
  });
});

describe('commands that read never create state', () => {
  it.each([
    ['keys', 'list'],
    ['ledger', 'events'],
    ['ledger', 'verify'],
    ['ledger', 'checkpoint'],
    ['ledger', 'prove', '1'],
    ['snapshot', 'pins'],
    ['snapshot', 'gc'],
    ['task', 'show', TASK],
    ['api', 'token', 'delete'],
  ])('assay %s %s on a missing ASSAY_HOME', async (...args: string[]) => {
    const h = tmp.fresh('home');
    const err: string[] = [];
    const code = await runCli(args, { home: h, out: () => undefined, err: (t) => void err.push(t), progress: () => silentProgress });
    expect(code === 0 || code === 3).toBe(true);
    if (code === 3) expect(err.join('\n')).toMatch(/^assay: error (LEDGER_NOT_INITIALIZED|SNAPSHOT_STORE_NOT_FOUND): /);
    expect(existsSync(h)).toBe(false);
  });
});

describe('the program itself', () => {
  it('--version and -V print the version', async () => {
    for (const flag of ['--version', '-V']) {
      const r = await assay([flag], tmp.fresh('home'));
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/^assay \d+\.\d+\.\d+ \(node v20\./);
    }
  });

  it('an unknown option or command is one usage line, with a suggestion', async () => {
    const r = await assay(['ledger', 'verify', '--trusted-roots', 'x'], tmp.fresh('home'));
    expectOneLine(r, 2, 'CLI_USAGE', /unknown option '--trusted-roots'/);
    const r2 = await assay(['ledgr'], tmp.fresh('home'));
    expectOneLine(r2, 2, 'CLI_USAGE', /unknown command 'ledgr'/);
    expect(r.stderr).toMatch(/Did you mean --trusted-root\?/);
    expect(r2.stderr).toMatch(/Did you mean ledger\?/);
  });

  it('--json turns errors into one JSON document on stdout, nothing on stderr', async () => {
    const r = await assay(['run', TASK, '--cooldown', 'abc', '--json'], tmp.fresh('home'));
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('');
    expect(JSON.parse(r.stdout)).toEqual({
      error: { code: 'CLI_USAGE', kind: 'invalid_input', message: '--cooldown must be a non-negative integer, got "abc"', exitCode: 2, details: {} },
    });
    const r2 = await assay(['keys', 'list', '--json'], tmp.fresh('home'));
    expect(r2.code).toBe(3);
    expect(r2.stderr).toBe('');
    expect((JSON.parse(r2.stdout) as { error: { code: string } }).error.code).toBe('LEDGER_NOT_INITIALIZED');
  });
});
