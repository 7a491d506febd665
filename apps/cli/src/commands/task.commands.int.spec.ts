import { cpSync, mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command } from 'commander';
import { silentProgress } from '@assay/core';
import { reportError } from '../main';
import { register } from './task.commands';
import type { CliContext } from '../cli-context';

const EXAMPLE = join(__dirname, '../../../../examples/tasks/hello-judge');
const HOME = mkdtempSync(join(tmpdir(), 'assay-task-home-'));
afterAll(() => rmSync(HOME, { recursive: true, force: true }));

async function run(args: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const ctx: CliContext = { home: HOME, out: (t) => out.push(t), err: (t) => err.push(t), progress: () => silentProgress };
  const program = new Command('assay').exitOverride();
  register(program, ctx);
  let code = 0;
  try {
    await program.parseAsync(args, { from: 'user' });
  } catch (e) {
    code = reportError(e, ctx);
  }
  return { code, out, err };
}

describe('assay task', () => {
  it('show --json carries the task digests, the same for a copy of the task and different after an edit', async () => {
    const copy = mkdtempSync(join(tmpdir(), 'assay-task-copy-'));
    try {
      cpSync(EXAMPLE, copy, { recursive: true });
      const a = JSON.parse((await run(['task', 'show', EXAMPLE, '--json'])).out.join('')) as { digests: Record<string, string> };
      const b = JSON.parse((await run(['task', 'show', copy, '--json'])).out.join('')) as { digests: Record<string, string> };
      expect(a.digests).toEqual(b.digests);
      expect(a.digests.task).toMatch(/^bafy/);
      expect(a.digests.instruction).toMatch(/^sha256:[0-9a-f]{64}$/);
      writeFileSync(join(copy, 'tests', 'test.sh'), '#!/bin/bash\necho changed\n');
      const c = JSON.parse((await run(['task', 'show', copy, '--json'])).out.join('')) as { digests: Record<string, string> };
      expect(c.digests.tests).not.toBe(a.digests.tests);
      expect(c.digests.task).not.toBe(a.digests.task);
      expect(c.digests.environment).toBe(a.digests.environment);
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });

  it('validate: ok with a one-line summary', async () => {
    const r = await run(['task', 'validate', EXAMPLE]);
    expect(r).toMatchObject({ code: 0, err: [] });
    expect(r.out).toEqual([expect.stringMatching(/^ok assay\/hello-judge \(schema 1\.4\): /)]);
  });

  it('validate: ok, then one line per warning (also in --json); show prints them too', async () => {
    const copy = mkdtempSync(join(tmpdir(), 'assay-task-warn-'));
    try {
      cpSync(EXAMPLE, copy, { recursive: true });
      writeFileSync(join(copy, 'tests', 'test.sh'), '#!/bin/bash\napt-get install -y jq\necho 1 > /logs/verifier/reward.txt\n');
      const r = await run(['task', 'validate', copy]);
      expect(r).toMatchObject({ code: 0, err: [] });
      expect(r.out).toEqual([
        expect.stringMatching(/^ok assay\/hello-judge /),
        expect.stringMatching(/^warning TASK_TESTS_NEED_NETWORK tests\/test.sh: appears to download tools or packages \(line 2: apt-get\)/),
      ]);
      const j = JSON.parse((await run(['task', 'validate', copy, '--json'])).out[0] as string) as { ok: boolean; warnings: { code: string }[] };
      expect(j).toMatchObject({ ok: true, warnings: [{ code: 'TASK_TESTS_NEED_NETWORK' }] });
      const h = await run(['task', 'show', copy]);
      expect(h.out.some((l) => l.startsWith('placement   '))).toBe(true);
      expect(h.out.some((l) => l.startsWith('warning     TASK_TESTS_NEED_NETWORK tests/test.sh: '))).toBe(true);
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });

  it('validate: every problem, exit 2', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'assay-cli-'));
    try {
      mkdirSync(join(dir, 'tests'));
      writeFileSync(join(dir, 'task.toml'), 'schema_version = "1.4"\n[environment]\ngpus = "1"\ncpus = true\n');
      const r = await run(['task', 'validate', dir]);
      expect(r.code).toBe(2);
      expect(r.out).toEqual([
        'TASK_FILE_MISSING instruction.md: missing: a task needs the file instruction.md',
        'TASK_FILE_MISSING environment: missing: a task needs the directory environment',
        'TASK_FILE_MISSING tests/test.sh: missing: a task needs the file tests/test.sh',
        expect.stringMatching(/^TASK_INVALID_TYPE task.toml: environment.cpus: expected an integer from 1 to 4096, got the boolean true$/),
        expect.stringMatching(/^TASK_INVALID_TYPE task.toml: environment.gpus: /),
      ]);
      expect(r.err).toEqual([expect.stringMatching(/^assay: error TASK_INVALID: .*: 5 problems found \(listed above\)$/)]);
      const j = await run(['task', 'validate', dir, '--json']);
      expect(JSON.parse(j.out[0] as string)).toMatchObject({ ok: false, summary: null });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('show --json prints the plan; a missing directory exits 3', async () => {
    const r = await run(['task', 'show', EXAMPLE, '--json']);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out.join('\n'))).toMatchObject({ name: 'assay/hello-judge', verifier: { timeoutSec: 60 } });
    const h = await run(['task', 'show', EXAMPLE]);
    expect(h.out[0]).toBe('task        assay/hello-judge');
    const m = await run(['task', 'validate', '/nonexistent/task']);
    expect(m.code).toBe(3);
  });
});
