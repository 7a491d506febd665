/**
 * npm run bench:judge [-- --runs N --mb M]
 *
 * The harness's own cost per judged submission, on this machine, in one run: a full `JudgeRunner.judge` of a
 * trivial test (`echo 1 > /logs/verifier/reward.txt`) on a snapshot of M MB (default 10) already in the store —
 * materialise with verification, create volume and container, record JudgeLaunched, start, inject the tests,
 * run, collect the reward through the archive API, tear down, record JudgeCompleted + RewardRecorded — next to a
 * bare `docker run --rm` of the same command in the same judge image with the same files bind-mounted (tests, an
 * already materialised copy of the workspace, a reward directory). Runs alternate so drift hits both alike.
 * Target: the harness's median at most 2x the bare median. Also prints where the harness's time goes.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { randomIds, systemClock } from '@assay/core';
import { DockerodeRuntime, type ContainerRuntime } from '@assay/containers';
import { initLedgerHome } from '@assay/ledger';
import { JudgeRunner, ProcessOwnerRegistry, type JudgeSnapshots } from '@assay/judge';
import { openJudgeRuntime, homeTag } from '@assay/runtime';
import { arg, fmt, now, percentile, report } from './bench-util';

const REPO = resolve(__dirname, '..').replace(/\/dist$/, '');
const TASK = join(REPO, 'tests/fixtures/judge/tasks/trivial');

type Phase = 'rules+materialise' | 'create' | 'start+inject' | 'run' | 'collect' | 'teardown';

/** Wraps the runtime and snapshot port to time each phase of a judging. */
function timed<T extends object>(target: T, phases: Record<string, Phase>, acc: Map<Phase, number>): T {
  return new Proxy(target, {
    get(t, prop, recv) {
      const v = Reflect.get(t, prop, recv) as unknown;
      const phase = phases[String(prop)];
      if (typeof v !== 'function' || !phase) return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
      return (...args: unknown[]) => {
        const t0 = now();
        const r = (v as (...a: unknown[]) => unknown).apply(t, args);
        if (r && typeof (r as Promise<unknown>).then === 'function') {
          return (r as Promise<unknown>).finally(() => acc.set(phase, (acc.get(phase) ?? 0) + now() - t0));
        }
        acc.set(phase, (acc.get(phase) ?? 0) + now() - t0);
        return r;
      };
    },
  });
}

async function main(): Promise<void> {
  const runs = arg('runs', 15);
  const mb = arg('mb', 10);
  const dir = mkdtempSync(join(tmpdir(), 'assay-bench-judge-'));
  try {
    const home = join(dir, 'home');
    await initLedgerHome(home, { clock: systemClock, ids: randomIds, origin: 'assay.bench/judge' });
    const acc = new Map<Phase, number>();
    const docker = new DockerodeRuntime();
    const containers = timed<ContainerRuntime>(
      docker,
      {
        createVolume: 'create',
        createContainer: 'create',
        inspectContainer: 'collect',
        start: 'start+inject',
        wait: 'run',
        readArchive: 'collect',
        removeContainer: 'teardown',
        removeVolume: 'teardown',
      },
      acc,
    );
    const rt = await openJudgeRuntime({ home, containers });
    // The same runner as `assay judge` builds, with the snapshot port timed as well.
    const runner = new JudgeRunner({
      runtime: containers,
      snapshots: timed<JudgeSnapshots>(rt.snapshots, { walk: 'rules+materialise', materialise: 'rules+materialise' }, acc),
      recorder: rt.recorder,
      owners: new ProcessOwnerRegistry(),
      clock: systemClock,
      ids: randomIds,
      judgesDir: join(home, 'judges'),
      homeTag: homeTag(home),
      hostCpus: availableParallelism(),
    });

    // A workspace of `mb` MB: ten files of random bytes and some small ones.
    const ws = join(dir, 'ws');
    mkdirSync(join(ws, 'src'), { recursive: true });
    for (let i = 0; i < 10; i++) writeFileSync(join(ws, `data-${i}.bin`), randomBytes(Math.round((mb * 1_000_000) / 10)));
    for (let i = 0; i < 50; i++) writeFileSync(join(ws, 'src', `m${i}.py`), `x = ${i}\n`);
    const task = await rt.loadTask(TASK);
    const cid = await rt.snapshots.snapshotDirectory(ws);
    const image = task.images.judge.id;
    console.log(
      `judge benchmark: ${runs} runs each, snapshot of ${mb} MB (${cid.slice(0, 20)}...), image ${image.slice(0, 19)}, docker ${spawnSync('docker', ['version', '--format', '{{.Server.Version}}'], { encoding: 'utf8' }).stdout.trim()}`,
    );

    // The bare run: the same image and command, files already in place.
    const bareWs = join(dir, 'bare-ws');
    cpSync(ws, bareWs, { recursive: true });
    const bareLogs = join(dir, 'bare-logs');
    mkdirSync(bareLogs);
    const bare = (): number => {
      const t0 = now();
      const r = spawnSync(
        'docker',
        [
          'run',
          '--rm',
          '--network',
          'none',
          '-v',
          `${join(TASK, 'tests')}:/tests:ro`,
          '-v',
          `${bareWs}:/workspace:ro`,
          '-v',
          `${bareLogs}:/logs/verifier`,
          '-w',
          '/workspace',
          image,
          'bash',
          '/tests/test.sh',
        ],
        { stdio: 'ignore' },
      );
      const ms = now() - t0;
      if (r.status !== 0) throw new Error(`bare docker run failed with ${r.status}`);
      return ms;
    };
    const harness = async (): Promise<number> => {
      const t0 = now();
      const r = await runner.judge(task.prepared, cid);
      const ms = now() - t0;
      if (r.status !== 'completed' || r.primaryScore !== 1) throw new Error(`judge ended ${r.status}: ${r.detail ?? ''}`);
      return ms;
    };

    bare();
    await harness(); // warm up both (page cache, image layers, daemon)
    acc.clear();
    const bareMs: number[] = [];
    const harnessMs: number[] = [];
    for (let i = 0; i < runs; i++) {
      bareMs.push(bare());
      harnessMs.push(await harness());
    }
    await rt.close();
    bareMs.sort((a, b) => a - b);
    harnessMs.sort((a, b) => a - b);
    const med = (xs: number[]) => percentile(xs, 50);
    console.log(`bare docker run --rm: median ${fmt(med(bareMs), 0)} ms, p90 ${fmt(percentile(bareMs, 90), 0)} ms`);
    console.log(`assay Judge:          median ${fmt(med(harnessMs), 0)} ms, p90 ${fmt(percentile(harnessMs, 90), 0)} ms`);
    const total = harnessMs.reduce((a, b) => a + b, 0) / runs;
    const parts = [...acc.entries()].map(([k, v]) => [k, v / runs] as const);
    const accounted = parts.reduce((a, [, v]) => a + v, 0);
    console.log(
      `harness breakdown (mean per judging): ${parts.map(([k, v]) => `${k} ${fmt(v, 0)} ms`).join(', ')}, record events + log + result ${fmt(total - accounted, 0)} ms (total ${fmt(total, 0)} ms)`,
    );
    const met = report([
      {
        name: `judged submission, ${mb} MB snapshot (median)`,
        figure: med(harnessMs),
        baseline: med(bareMs),
        unit: 'ms',
        target: 2,
        atMost: true,
        baselineName: 'bare docker run --rm of the same command',
      },
    ]);
    process.exitCode = met ? 0 : 1;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

void main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
