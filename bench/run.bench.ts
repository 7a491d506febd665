/**
 * npm run bench:run [-- --runs N --submissions K]
 *
 * The research run's own wall-clock cost on this machine: `runResearch` (what `assay run` does) on
 * examples/tasks/tiny-optimizer with a command agent that does nothing but submit K times (default 4), N runs
 * (default 3). Each run's total is split into the Judges' time (JudgeRunner.judge, per round), the snapshots' time,
 * the agent's time (the exec, which contains the rounds it waited for) and the rest: images check, Work
 * create/start/removal, RunStarted, baseline, completion. Target: the run's median total at most 1.5x the median
 * time of the Judges it contains plus 3 s of fixed setup per run.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { randomIds, systemClock } from '@assay/core';
import { initLedgerHome } from '@assay/ledger';
import { runResearch, type RunReport } from '@assay/runtime';
import { arg, fmt, percentile, report } from './bench-util';

const REPO = resolve(__dirname, '..').replace(/\/dist$/, '');
const TASK = join(REPO, 'examples/tasks/tiny-optimizer');

const median = (xs: number[]) =>
  percentile(
    [...xs].sort((a, b) => a - b),
    50,
  );

async function main(): Promise<void> {
  const runs = arg('runs', 3);
  const k = arg('submissions', 4);
  const dir = mkdtempSync(join(tmpdir(), 'assay-bench-run-'));
  try {
    const home = join(dir, 'home');
    await initLedgerHome(home, { clock: systemClock, ids: randomIds, origin: 'assay.bench/run' });
    const reports: RunReport[] = [];
    for (let i = 0; i < runs; i++) {
      const r = await runResearch({ home, taskDir: TASK, agent: `command:for i in $(seq ${k}); do rsi-submit > /dev/null; done`, runId: `bench-${i + 1}` });
      if (r.rounds.length !== k) throw new Error(`run ${r.run}: ${r.rounds.length} rounds, expected ${k}`);
      reports.push(r);
      const t = r.timings;
      console.log(
        `run ${i + 1}/${runs}: total ${fmt(t.totalMs)} ms | judges ${fmt(t.judgeMs)} ms (${k} rounds) | snapshots ${fmt(t.snapshotMs)} ms | agent exec ${fmt(t.agentMs)} ms | outside the agent ${fmt(t.totalMs - t.agentMs)} ms | rounds' harness cost ${fmt(t.agentMs - t.judgeMs)} ms`,
      );
    }
    const total = median(reports.map((r) => r.timings.totalMs));
    const judges = median(reports.map((r) => r.timings.judgeMs));
    const perRound = median(reports.map((r) => (r.timings.agentMs - r.timings.judgeMs) / k));
    console.log(`median per-round harness cost (snapshot, freeze/thaw, ledger, endpoint; agent's own work ~0): ${fmt(perRound, 1)} ms`);
    const ok = report([
      { name: 'run total (median)', figure: total, baseline: judges * 1.5 + 3000, unit: 'ms', target: 1, atMost: true, baselineName: '1.5 x Judges + 3 s' },
    ]);
    process.exitCode = ok ? 0 : 1;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(2);
});
