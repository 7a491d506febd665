/**
 * Every command, fed random mixtures of its own flags, stray arguments and hostile values: whatever the mixture, the
 * result is success or a documented error (exit 2-7, one line naming the problem), never exit 70 or a stack trace,
 * never a hang. Runs in this process (runCli with a capturing context) so that hundreds of calls fit in a minute.
 * Replay a failure with ASSAY_FUZZ_SEED=<seed printed in the failure>.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Command } from 'commander';
import { silentProgress } from '@assay/core';
import { buildProgram, runCli } from '../../apps/cli/src/main';
import { commandPath, leafCommands } from '../../apps/cli/src/cli-reference';
import type { CliContext } from '../../apps/cli/src/cli-context';
import { prng } from '../support/prng';
import { scratchDirs } from '../support/scratch';

const tmp = scratchDirs('assay-cli-fuzz-');
const SEED = Number(process.env.ASSAY_FUZZ_SEED ?? Date.now() % 1_000_000);
const CALLS = 2000;

/**
 * Commands that would do long real work on valid input: build the Debian base image; serve the HTTP API until stopped
 * (its argument checks are in tests/api/api-cli.int.spec.ts).
 */
const EXCLUDED = new Set(['images base', 'serve']);

interface Outcome {
  code: number;
  out: string;
  err: string;
}

function quietContext(home: string): { ctx: CliContext; outcome: () => Omit<Outcome, 'code'> } {
  const out: string[] = [];
  const err: string[] = [];
  return {
    ctx: { home, out: (t) => void out.push(t), err: (t) => void err.push(t), progress: () => silentProgress },
    outcome: () => ({ out: out.join('\n'), err: err.join('\n') }),
  };
}

describe('CLI fuzz: random argument mixtures never end in exit 70', () => {
  const cwd = process.cwd();
  const work = join(tmp.base, 'cwd');
  const file = join(tmp.base, 'a-file.txt');
  const emptyDir = join(tmp.base, 'empty-dir');
  const jsonl = join(tmp.base, 'events.jsonl');
  beforeAll(() => {
    mkdirSync(work);
    mkdirSync(emptyDir);
    writeFileSync(file, 'not what any command expects\n');
    writeFileSync(jsonl, '{"stream":"notes-1","type":"Note","data":{"text":"hi"}}\n{"stream":"run-x","type":"RunStarted","data":{}}\nnot json\n');
    // relative paths in the mixtures (../x) land in the scratch directory, never in the repository
    process.chdir(work);
  });
  afterAll(() => process.chdir(cwd));

  it(`${CALLS} calls, seed ${SEED}`, async () => {
    const rand = prng(SEED);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;
    const values = [
      '',
      ' ',
      'abc',
      '-1',
      '0',
      '1',
      '7',
      '1e3',
      '0x10',
      '99999999999999999999',
      '../x',
      'x/../../y',
      `${tmp.base}/missing/x`,
      file,
      emptyDir,
      jsonl,
      '/proc/nope',
      '/sys/nope',
      'Note',
      'RunStarted',
      'notes-1',
      'run-x',
      'key-x',
      '{"text":"hi"}',
      '{"__proto__":{"a":1}}',
      '[1,2]',
      '{',
      'any',
      'no_stream',
      'bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy',
      'bafyfoo',
      'maximize',
      'up',
      'controller',
      'auditor',
      'reference',
      'command:true',
      'codex',
      'name+0123abcd',
      'é\u202etxt',
      '\u001b[31mred',
      'x'.repeat(5000),
    ];
    const commands = leafCommands(buildProgram(quietContext(tmp.base).ctx)).filter((c) => !EXCLUDED.has(commandPath(c)));
    expect(commands.length).toBeGreaterThan(20);
    const failures: string[] = [];
    const codes = new Map<number, number>();
    for (let i = 0; i < CALLS; i++) {
      const cmd: Command = pick(commands);
      const args = commandPath(cmd).split(' ');
      // mostly well-formed shapes (each argument and required option given once) with hostile values, so that the
      // calls reach the commands' own checks; sometimes a missing, extra or unknown piece for the parser
      for (const a of cmd.registeredArguments) if (a.required || rand() < 0.5) args.push(pick(values));
      for (const o of cmd.options) {
        if (o.mandatory || rand() < 0.25) {
          args.push(o.long ?? o.short ?? '');
          if (!o.isBoolean()) args.push(pick(values));
        }
      }
      const extra = rand() < 0.3 ? Math.floor(rand() * 3) : 0;
      for (let k = 0; k < extra; k++) args.splice(1 + Math.floor(rand() * args.length), 0, pick([...values, '--json', '--help', '--bogus', '-x', '--']));
      // each call gets a home of its own half the time, or a shared one that earlier calls may have initialised
      const home = rand() < 0.5 ? join(tmp.base, `home-${i}`) : join(tmp.base, 'shared-home');
      const q = quietContext(home);
      let timer: NodeJS.Timeout | undefined;
      const code = await Promise.race([
        runCli(args, q.ctx),
        new Promise<number>((res) => {
          timer = setTimeout(() => res(-1), 30_000);
        }),
      ]).finally(() => clearTimeout(timer));
      codes.set(code, (codes.get(code) ?? 0) + 1);
      const { err } = q.outcome();
      if (code === 70 || code === -1 || /internal error|\n\s+at /.test(err)) {
        failures.push(
          `seed ${SEED} call ${i}: assay ${JSON.stringify(args).slice(0, 300)} -> ${code === -1 ? 'no answer in 30 s' : `exit ${code}`}\n${err.slice(0, 600)}`,
        );
      } else if (code === 5 && args[0] === 'ledger' && args[1] === 'verify' && /ledger verification FAILED|"ok": false/.test(q.outcome().out)) {
        // a verification that fails is a report on stdout (docs/operations.md), not an error line
      } else if (
        (code === 5 || code === 6) &&
        args[0] === 'verify' &&
        /^(INVALID|could not check): step |"verdict": "(invalid|cannot_check)"/m.test(q.outcome().out)
      ) {
        // so is a bundle's verdict (docs/bundle-format.md, "Verifying")
      } else if (code !== 0) {
        // a failure is one line (a usage error may add commander's "(Did you mean ...?)"), with a code
        const lines = err
          .trimEnd()
          .split('\n')
          .filter((l) => l !== '' && !/^\(Did you mean .*\?\)$/.test(l) && !/^assay: (note|warning): /.test(l));
        if (!args.includes('--json') && (lines.length !== 1 || !/^assay: error [A-Z0-9_]+: /.test(lines[0] ?? ''))) {
          failures.push(`seed ${SEED} call ${i}: assay ${JSON.stringify(args).slice(0, 300)} -> exit ${code} but not one error line:\n${err.slice(0, 600)}`);
        }
      }
    }
    expect(failures).toEqual([]);
    // the mixtures reach the commands' own checks, not only the argument parser: successes and several error kinds
    const seen = Object.fromEntries([...codes].sort((x, y) => x[0] - y[0]));
    process.stderr.write(`cli fuzz, seed ${SEED}: exit codes ${JSON.stringify(seen)}\n`);
    expect(codes.get(0) ?? 0).toBeGreaterThan(CALLS / 20);
    expect([...codes.keys()].filter((c) => c >= 2 && c <= 7).length).toBeGreaterThanOrEqual(3);
  }, 600_000);
});
