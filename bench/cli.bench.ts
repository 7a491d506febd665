/**
 * npm run bench:cli [-- --spawns 10] [-- --events 30000]
 *
 * What a person at a terminal waits for. Prints, in one run on this machine:
 *  - start-up: the median wall time of `--spawns` spawns each of `node bin/assay.js --help`, `node bin/assay.js ledger
 *    verify --help` and `node bin/assay.js task validate examples/tasks/tiny-optimizer`, next to a bare `node -e ''`
 *    spawned the same way in the same run (interleaved, so a slow minute of the shared VM hits all alike); target:
 *    within 2x of bare (ratio bare/command >= 0.5);
 *  - bulk append: `assay ledger append --file` of `--events` generated Note and TaskRegistered events (a fresh
 *    ASSAY_HOME after `assay ledger init`), wall time of the whole command (start-up, reading and checking the file,
 *    signing, one transaction), as events/s, next to the ledger benchmark's own batched appends measured in the same
 *    run (bench/ledger.bench.ts's way: the same events through `Ledger.append`, about 100 events per group commit, in
 *    process, no start-up); target: ratio >= 0.5.
 */
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock, SequentialIds, randomIds, systemClock } from '@assay/core';
import { LedgerHome, type NewEvent, initLedgerHome } from '@assay/ledger';
import { arg, fmt, now, percentile, report } from './bench-util';

/** The repository root: this file runs as dist/bench/cli.bench.js. */
const ROOT = join(__dirname, '..', '..');
const BIN = join(ROOT, 'bin', 'assay.js');

function run(args: string[], env: NodeJS.ProcessEnv): { ms: number; status: number | null; stderr: string; stdout: string } {
  const t0 = now();
  const r = spawnSync(process.execPath, args, { cwd: ROOT, env, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  return { ms: now() - t0, status: r.status, stderr: r.stderr, stdout: r.stdout };
}

/** The events of the bulk file: mostly Notes in a few streams, and a TaskRegistered every 100th line. */
function benchEvents(n: number): Array<{ stream: string; type: string; data: Record<string, unknown>; id: string }> {
  const out = [];
  for (let i = 0; i < n; i++) {
    if (i % 100 === 99) {
      const task = `bench-${i}`;
      out.push({
        stream: `task-${task}`,
        type: 'TaskRegistered',
        data: {
          task,
          name: `Bench task ${i}`,
          digest: `sha256:${i.toString(16).padStart(64, '0')}`,
          instructionDigest: `sha256:${(i + 1).toString(16).padStart(64, '0')}`,
          testsDigest: `sha256:${(i + 2).toString(16).padStart(64, '0')}`,
          environmentDigest: `sha256:${(i + 3).toString(16).padStart(64, '0')}`,
        },
        id: randomUUID(),
      });
    } else
      out.push({ stream: `note-bench${i % 7}`, type: 'Note', data: { text: `bulk import line ${i}: measured 0.${i} on round ${i % 160}` }, id: randomUUID() });
  }
  return out;
}

async function main(): Promise<void> {
  const spawns = arg('spawns', 10);
  const events = arg('events', 30_000);
  const dir = mkdtempSync(join(tmpdir(), 'assay-bench-cli-'));
  console.log(`cli benchmark: ${spawns} spawns per command, ${events} events in one bulk append, ${availableParallelism()} cores, node ${process.version}`);
  try {
    const env: NodeJS.ProcessEnv = { ...process.env, ASSAY_HOME: join(dir, 'home') };
    delete env['NODE_OPTIONS'];

    // --- start-up, interleaved with the bare node spawn
    const commands: Array<{ name: string; args: string[] }> = [
      { name: "node -e ''", args: ['-e', ''] },
      { name: 'assay --help', args: [BIN, '--help'] },
      { name: 'assay ledger verify --help', args: [BIN, 'ledger', 'verify', '--help'] },
      { name: 'assay task validate examples/tasks/tiny-optimizer', args: [BIN, 'task', 'validate', join(ROOT, 'examples', 'tasks', 'tiny-optimizer')] },
    ];
    const times = commands.map(() => [] as number[]);
    for (const c of commands) run(c.args, env); // warm the file cache
    for (let i = 0; i < spawns; i++)
      commands.forEach((c, k) => {
        const r = run(c.args, env);
        if (r.status !== 0) throw new Error(`${c.name} exited ${r.status}: ${r.stderr.slice(0, 500)}`);
        times[k]!.push(r.ms);
      });
    const median = times.map((t) =>
      percentile(
        [...t].sort((a, b) => a - b),
        50,
      ),
    );
    const bare = median[0]!;

    // --- bulk append through the CLI
    const lines = benchEvents(events);
    const file = join(dir, 'events.jsonl');
    writeFileSync(file, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
    const init = run([BIN, 'ledger', 'init', '--origin', 'assay.bench/cli'], env);
    if (init.status !== 0) throw new Error(`ledger init exited ${init.status}: ${init.stderr}`);
    const bulk = run([BIN, 'ledger', 'append', '--file', file], env);
    if (bulk.status !== 0) throw new Error(`ledger append --file exited ${bulk.status}: ${bulk.stderr.slice(0, 500)}`);
    const cliRate = events / (bulk.ms / 1000);
    const again = run([BIN, 'ledger', 'append', '--file', file], env);
    if (again.status !== 0) throw new Error(`the retry of ledger append --file exited ${again.status}: ${again.stderr.slice(0, 500)}`);

    // --- baseline: the ledger benchmark's batched appends (Ledger.append, about 100 events per group commit)
    const home = join(dir, 'lib-home');
    await initLedgerHome(home, { clock: systemClock, ids: randomIds, origin: 'assay.bench/cli-lib' });
    const h = new LedgerHome(home, { clock: new ManualClock('2026-12-03T00:00:00.000Z', 1), ids: new SequentialIds() });
    const fresh = benchEvents(events);
    const t0 = now();
    for (let i = 0; i < fresh.length;) {
      const batch: Array<Promise<unknown>> = [];
      for (let n = 0; n < 100 && i < fresh.length; n++, i++) {
        const e = fresh[i]!;
        batch.push(h.ledger.append(e.stream, [{ type: e.type, data: e.data, id: e.id } as NewEvent]));
      }
      await Promise.all(batch);
    }
    const libRate = events / ((now() - t0) / 1000);
    await h.db.close();

    console.log(`start-up medians: ${commands.map((c, k) => `${c.name} ${fmt(median[k]!, 1)} ms`).join(', ')}`);
    console.log(`bulk append: ${bulk.stdout.trim()} in ${fmt(bulk.ms)} ms; the same file again (all already recorded) in ${fmt(again.ms)} ms`);
    const ok = report([
      ...commands.slice(1).map((c, k) => ({
        name: `start-up of ${c.name} (1/median ms, per second)`,
        figure: 1000 / median[k + 1]!,
        baseline: 1000 / bare,
        unit: 'starts/s',
        target: 0.5,
        baselineName: "node -e ''",
      })),
      {
        name: `assay ledger append --file (${events} events, whole command)`,
        figure: cliRate,
        baseline: libRate,
        unit: 'events/s',
        target: 0.5,
        baselineName: 'Ledger.append in process, ~100 events per group commit',
      },
    ]);
    console.log(ok ? 'all targets met' : 'some targets NOT met');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
