import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command } from 'commander';
import { silentProgress } from '@assay/core';
import { reportError } from '../main';
import { register } from './task.commands';
import type { CliContext } from '../cli-context';

const EXAMPLE = join(__dirname, '../../../../examples/tasks/hello-judge');

async function run(args: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const ctx: CliContext = { home: '/tmp/none', out: (t) => out.push(t), err: (t) => err.push(t), progress: () => silentProgress };
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
  it('validate: ok with a one-line summary', async () => {
    const r = await run(['task', 'validate', EXAMPLE]);
    expect(r).toMatchObject({ code: 0, err: [] });
    expect(r.out).toEqual([expect.stringMatching(/^ok assay\/hello-judge \(schema 1\.4\): /)]);
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
