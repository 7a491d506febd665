/**
 * The Judge's orchestration against the in-memory container runtime, a directory-backed snapshot port and a real
 * signing Ledger over memory stores (so every event is checked against the catalogue and signed by the right role).
 */
import * as fs from 'node:fs';
import { join, resolve } from 'node:path';
import { containerError, readTar, tarHeader, tarPadding, type ContainerSpec, type ImportImageOptions } from '@assay/containers';
import { FakeContainerRuntime } from '../../libs/containers/src/testing';
import { loadTaskPlan } from '@assay/task-format';
import { JudgeRunner, TaskImageBuilder, type JudgeResult, type PreparedTask } from '@assay/judge';
import {
  DirSnapshots,
  TestOwners,
  installFakeEntrypoint,
  memoryLedger,
  removeFakeSnapshots,
  tmp,
  writeTask,
  type FakeScenario,
  type MemoryLedger,
} from './judge-fakes';

const JUDGE_RUNTIME = resolve(__dirname, '../../task-runtime/judge');

interface World {
  runtime: FakeContainerRuntime;
  snapshots: DirSnapshots;
  ml: MemoryLedger;
  owners: TestOwners;
  home: string;
  runner: JudgeRunner;
  images: TaskImageBuilder;
}

const cleanup: string[] = [];
afterAll(() => {
  for (const d of cleanup) fs.rmSync(d, { recursive: true, force: true });
  removeFakeSnapshots();
});

async function world(o: { procVisibility?: 'hidden' | 'visible' } = {}): Promise<World> {
  const runtime = new FakeContainerRuntime();
  runtime.addImage({ tag: 'assay/base:bookworm' });
  installFakeEntrypoint(runtime);
  const snapshots = new DirSnapshots();
  const ml = await memoryLedger();
  const owners = new TestOwners();
  const home = tmp('judge-unit-home-');
  cleanup.push(home);
  const runner = new JudgeRunner({
    runtime,
    snapshots,
    recorder: ml.recorder,
    owners,
    clock: ml.clock,
    ids: ml.ids,
    judgesDir: join(home, 'judges'),
    homeTag: 'home1',
    hostCpus: 2,
    drainMs: 1000,
    ...(o.procVisibility ? { procVisibility: o.procVisibility } : {}),
  });
  const images = new TaskImageBuilder({
    runtime,
    snapshots,
    recorder: ml.recorder,
    clock: ml.clock,
    logsDir: join(home, 'images', 'logs'),
    judgeRuntimeDir: JUDGE_RUNTIME,
  });
  return { runtime, snapshots, ml, owners, home, runner, images };
}

async function prepared(w: World, scenario: FakeScenario, o: { toml?: string; outputCapBytes?: number; metric?: string } = {}): Promise<PreparedTask> {
  const dir = writeTask(tmp('judge-unit-task-'), scenario, o.toml === undefined ? {} : { toml: o.toml });
  cleanup.push(dir);
  const plan = await loadTaskPlan(dir);
  const images = await w.images.ensure(dir, plan);
  return w.runner.prepare(dir, plan, images, { ...(o.outputCapBytes ? { outputCapBytes: o.outputCapBytes } : {}), ...(o.metric ? { metric: o.metric } : {}) });
}

async function snapshot(w: World, files: Record<string, string> = { 'main.py': 'print(1)\n' }, links: Record<string, string> = {}): Promise<string> {
  const d = tmp('judge-unit-ws-');
  cleanup.push(d);
  for (const [p, c] of Object.entries(files)) {
    fs.mkdirSync(join(d, p, '..'), { recursive: true });
    fs.writeFileSync(join(d, p), c);
  }
  for (const [p, t] of Object.entries(links)) fs.symlinkSync(t, join(d, p));
  return w.snapshots.snapshotDirectory(d);
}

function leftovers(w: World, r: JudgeResult) {
  return { work: fs.existsSync(join(r.dir, 'snapshot')), owner: fs.existsSync(join(r.dir, 'owner.json')) };
}

/** DirSnapshots that can also stream a snapshot as tar entries (what full-rootfs Judges need). */
class ArchiveSnapshots extends DirSnapshots {
  async *archive(cid: string, skip: (path: string) => boolean): AsyncIterable<Uint8Array> {
    const root = this.dirs.get(cid) as string;
    const rec = function* (d: string, rel: string): Generator<Buffer> {
      for (const n of fs.readdirSync(d).sort()) {
        const p = join(d, n);
        const r = rel ? `${rel}/${n}` : n;
        if (skip(r)) continue;
        const st = fs.lstatSync(p);
        if (st.isDirectory()) {
          yield tarHeader({ path: r, type: 'dir', mode: 0o755 });
          yield* rec(p, r);
        } else if (st.isFile()) {
          const b = fs.readFileSync(p);
          yield tarHeader({ path: r, type: 'file', mode: 0o644, size: b.length });
          yield b;
          yield tarPadding(b.length);
        }
      }
    };
    yield* rec(root, '');
  }
}

/**
 * A full-rootfs task (workdir "/") judged by a runner over a snapshot store that can stream snapshots, and a snapshot
 * of a root file system that `plant` fills.
 */
async function rootfsSetup(plant: (ws: string) => void) {
  const w = await world();
  const snapshots = new ArchiveSnapshots();
  const runner = new JudgeRunner({
    runtime: w.runtime,
    snapshots,
    recorder: w.ml.recorder,
    owners: w.owners,
    clock: w.ml.clock,
    ids: w.ml.ids,
    judgesDir: join(w.home, 'judges'),
    homeTag: 'home1',
    hostCpus: 2,
    drainMs: 1000,
    judgeRuntimeDir: JUDGE_RUNTIME,
  });
  const dir = writeTask(tmp('judge-unit-task-'), { files: { 'reward.txt': '0.75' } });
  cleanup.push(dir);
  fs.writeFileSync(join(dir, 'task.toml'), fs.readFileSync(join(dir, 'task.toml'), 'utf8').replace('workdir = "/workspace"', 'workdir = "/"'));
  const plan = await loadTaskPlan(dir);
  const t = await runner.prepare(dir, plan, await w.images.ensure(dir, plan));
  const ws = tmp('judge-unit-rootfs-');
  cleanup.push(ws);
  plant(ws);
  const cid = await snapshots.snapshotDirectory(ws);
  return { w, runner, t, dir, plan, cid };
}

describe('JudgeRunner, full-rootfs task (fake runtime)', () => {
  it('judges from an image imported from the snapshot, with the harness injected fresh and no snapshot mount; the image is removed', async () => {
    const { w, runner, t, dir, plan, cid } = await rootfsSetup((ws) => {
      fs.mkdirSync(join(ws, 'etc'));
      fs.writeFileSync(join(ws, 'etc', 'answer'), '42');
      fs.mkdirSync(join(ws, 'opt/assay/judge'), { recursive: true });
      fs.writeFileSync(join(ws, 'opt/assay/judge/entrypoint'), 'planted by the agent');
    });
    expect([t.rootfs, t.workdir]).toEqual([true, '/']);
    // without a store that can stream a snapshot, such a task is refused up front
    await expect(w.runner.prepare(dir, plan, t.images)).rejects.toMatchObject({ code: 'JUDGE_TASK_UNSUPPORTED' });

    const imported: Array<{ o: ImportImageOptions; files: Map<string, string> }> = [];
    const specs: ContainerSpec[] = [];
    const importImage = w.runtime.importImage.bind(w.runtime);
    w.runtime.importImage = async (rootfs, o) => {
      const chunks: Buffer[] = [];
      for await (const c of rootfs) chunks.push(Buffer.from(c));
      const files = new Map<string, string>();
      for await (const r of readTar(
        (async function* () {
          yield Buffer.concat(chunks);
        })(),
        { maxArchiveBytes: 1 << 26, keep: () => 1 << 20 },
      ))
        files.set(r.header.path, r.content?.toString('utf8') ?? `<${r.header.type}>`);
      imported.push({ o, files });
      return importImage(
        (async function* () {
          yield Buffer.concat(chunks);
        })(),
        o,
      );
    };
    const createContainer = w.runtime.createContainer.bind(w.runtime);
    w.runtime.createContainer = async (spec) => {
      specs.push(spec);
      return createContainer(spec);
    };

    const r = await runner.judge(t, cid);
    expect([r.status, r.primaryScore]).toEqual(['completed', 0.75]);
    expect(imported).toHaveLength(1);
    const im = imported[0] as { o: ImportImageOptions; files: Map<string, string> };
    expect(im.files.get('etc/answer')).toBe('42');
    expect(im.files.get('opt/assay/judge/entrypoint')).toBe(fs.readFileSync(join(JUDGE_RUNTIME, 'entrypoint'), 'utf8'));
    expect(im.files.get('usr/local/bin/run-as-candidate')).toBe(fs.readFileSync(join(JUDGE_RUNTIME, 'run-as-candidate'), 'utf8'));
    expect([...im.files.keys()].filter((k) => k.startsWith('opt'))).toEqual([
      'opt/',
      'opt/assay/',
      'opt/assay/judge/',
      'opt/assay/judge/entrypoint',
      'opt/assay/judge/judge-setup',
      'opt/assay/judge/run-as-candidate',
    ]);
    // The interpreters root runs here are the agent's: no setup capability, /proc not hidden, and the launch says so.
    expect(specs[0]?.capAdd).toEqual(['SETUID', 'SETGID']);
    expect(specs[0]?.env).not.toHaveProperty('ASSAY_JUDGE_SETUP');
    expect(r.limits).toMatchObject({ setupCapabilities: [], procHidden: false });
    expect(im.o.labels).toMatchObject({
      'org.assay.role': 'judge-rootfs',
      'org.assay.judge': r.judge,
      'org.assay.owner': w.owners.self,
      'org.assay.snapshot': cid,
    });
    const spec = specs[0] as ContainerSpec;
    expect(spec.image).not.toBe(t.images.judge.id);
    expect(spec.mounts.map((m) => m.target)).toEqual(['/tests', '/logs/verifier', '/tmp', '/dev/shm']);
    expect(await w.runtime.listImages({ 'org.assay.role': 'judge-rootfs' })).toEqual([]);
    expect(w.runtime.calls).toContain(`removeImage ${spec.image}`);
  });
});

describe('JudgeRunner, full-rootfs import refused (fake runtime)', () => {
  const rootfsWorld = () =>
    rootfsSetup((ws) => {
      fs.mkdirSync(join(ws, 'etc'));
      fs.writeFileSync(join(ws, 'etc', '.wh.'), ''); // a whiteout of its own directory: Docker's layer format refuses it
    });

  /** Like the daemon: refuses a stream that names a whiteout (answered after reading it), or everything when broken. */
  function refusing(w: Awaited<ReturnType<typeof world>>, o: { broken: boolean }) {
    const importImage = w.runtime.importImage.bind(w.runtime);
    const tags: string[] = [];
    w.runtime.importImage = async (rootfs, opts) => {
      tags.push(opts.tag);
      const chunks: Buffer[] = [];
      for await (const c of rootfs) chunks.push(Buffer.from(c));
      const names: string[] = [];
      for await (const r of readTar(
        (async function* () {
          yield Buffer.concat(chunks);
        })(),
        { maxArchiveBytes: 1 << 26, keep: () => false },
      ))
        names.push(r.header.path);
      if (o.broken || names.some((n) => n.split('/').some((part) => part.startsWith('.wh.'))))
        throw containerError('CONTAINER_OPERATION_FAILED', `docker could not import ${opts.tag}: failed to mknod("/etc", S_IFCHR, 0): file exists`, {
          tag: opts.tag,
          refusedByDaemon: true,
        });
      return importImage(
        (async function* () {
          yield Buffer.concat(chunks);
        })(),
        opts,
      );
    };
    return tags;
  }

  it("a file system the daemon refuses while it imports the harness alone is the agent's doing: rule snapshot.refused, never a refund", async () => {
    const { w, runner, t, cid } = await rootfsWorld();
    const tags = refusing(w, { broken: false });
    const r = await runner.judge(t, cid);
    // A broken rule is a submission_error with score 0 and a RuleViolation (as for snapshot.limits).
    expect(r).toMatchObject({ status: 'submission_error', rule: { rule: 'snapshot.refused' }, primaryScore: 0 });
    expect(r.rule?.detail).toContain('cannot be made into an image');
    expect(tags).toHaveLength(2); // the import, then the probe
    expect(tags[1]).toMatch(/-probe$/);
    expect(await w.runtime.listImages({ 'org.assay.role': 'judge-rootfs' })).toEqual([]); // the probe image is gone
  });

  it('a daemon that refuses the harness alone too is at fault: infrastructure_error (refunded), as before', async () => {
    const { w, runner, t, cid } = await rootfsWorld();
    refusing(w, { broken: true });
    const r = await runner.judge(t, cid);
    expect(r).toMatchObject({ status: 'infrastructure_error' });
    expect(r.detail).toContain('making the Judge image from the snapshot failed');
  });
});

describe('JudgeRunner (fake runtime)', () => {
  it('completed: JudgeLaunched by the runtime key, JudgeCompleted and RewardRecorded by the judge key; everything torn down', async () => {
    const w = await world();
    const t = await prepared(w, { files: { 'reward.json': '{"reward": 0.5, "acc": 0.25}' }, stdout: 'hello\n' });
    const cid = await snapshot(w);
    const r = await w.runner.judge(t, cid);
    expect(r).toMatchObject({
      status: 'completed',
      exitCode: 0,
      rewards: { reward: 0.5, acc: 0.25 },
      primaryMetric: 'reward',
      primaryScore: 0.5,
      snapshot: cid,
      image: t.images.judge.id,
      network: 'none',
    });
    expect(r.limits).toMatchObject({
      pidsLimit: 1024,
      memoryBytes: 64 * 1048576,
      cpus: 1,
      readOnlyRootfs: true,
      capDrop: ['ALL'],
      capAdd: ['SETGID', 'SETPCAP', 'SETUID', 'SYS_ADMIN'],
      setupCapabilities: ['SETPCAP', 'SYS_ADMIN'],
      procHidden: true,
      noNewPrivileges: true,
    });
    const events = await w.ml.stream(r.stream);
    expect(events.map((e) => [e.type, e.signer])).toEqual([
      ['JudgeLaunched', 'runtime'],
      ['JudgeCompleted', 'judge'],
      ['RewardRecorded', 'judge'],
    ]);
    expect(events[0]?.data).toMatchObject({ judge: r.judge, image: t.images.judge.id, snapshot: cid, testsDigest: t.testsDigest, network: 'none' });
    expect(events[1]?.data).toMatchObject({ status: 'completed', exitCode: 0, outputBytes: 6, outputDigest: r.output.digest });
    expect(events[2]?.data).toEqual({ judge: r.judge, rewards: { reward: 0.5, acc: 0.25 }, primaryMetric: 'reward', primaryScore: 0.5 });
    expect(fs.readFileSync(r.output.path, 'utf8')).toBe('hello\n');
    expect(leftovers(w, r)).toEqual({ work: false, owner: false });
    expect(JSON.parse(fs.readFileSync(join(r.dir, 'result.json'), 'utf8'))).toMatchObject({ status: 'completed', judge: r.judge });
    expect(await w.runtime.listContainers({ 'org.assay.role': 'judge' })).toEqual([]);
    expect(await w.runtime.listVolumes({ 'org.assay.role': 'judge' })).toEqual([]);
  });

  it('verifier_error for NaN, and for a reward file that is a symlink', async () => {
    const w = await world();
    const nan = await w.runner.judge(await prepared(w, { files: { 'reward.json': '{"reward": NaN}' } }), await snapshot(w));
    expect(nan).toMatchObject({ status: 'verifier_error', rewards: null, detail: expect.stringContaining('NaN') });
    expect((await w.ml.stream(nan.stream)).map((e) => e.type)).toEqual(['JudgeLaunched', 'JudgeCompleted']);
    const link = await w.runner.judge(await prepared(w, { symlinks: { 'reward.txt': '/workspace/reward.txt' } }), await snapshot(w, { 'reward.txt': '1\n' }));
    expect(link).toMatchObject({ status: 'verifier_error', detail: expect.stringContaining('reward.txt: is a symbolic link') });
  });

  it('infrastructure_error when test.sh reports an infrastructure fault and writes no reward; both written is a verifier_error', async () => {
    const w = await world();
    const infra = await w.runner.judge(
      await prepared(w, { files: { 'infrastructure-error.txt': 'no usable GPU:\n  CUDA driver version is insufficient\n' }, exit: 4 }),
      await snapshot(w),
    );
    expect(infra).toMatchObject({
      status: 'infrastructure_error',
      rewards: null,
      primaryScore: null,
      exitCode: 4,
      detail: 'the verifier reported an infrastructure fault: no usable GPU: CUDA driver version is insufficient; test.sh exited with status 4',
    });
    expect((await w.ml.stream(infra.stream)).map((e) => e.type)).toEqual(['JudgeLaunched', 'JudgeCompleted']);
    const both = await w.runner.judge(
      await prepared(w, { files: { 'reward.json': '{"reward": 9}', 'infrastructure-error.txt': 'driver error' } }),
      await snapshot(w),
    );
    expect(both).toMatchObject({
      status: 'verifier_error',
      rewards: null,
      detail: expect.stringContaining('both reward.json and infrastructure-error.txt (driver error)'),
    });
  });

  it('verifier_timeout: killed, reward files never read', async () => {
    const w = await world();
    const t = await prepared(w, { files: { 'reward.txt': '1' }, sleepMs: 30_000 });
    const r = await w.runner.judge(t, await snapshot(w));
    expect(r).toMatchObject({ status: 'verifier_timeout', rewards: null, exitCode: null, detail: expect.stringContaining('verifier timeout of 1 s') });
    expect(w.runtime.calls.some((c) => c.startsWith('kill '))).toBe(true);
    expect(w.runtime.calls.some((c) => c.startsWith('readArchive'))).toBe(false);
    expect((await w.ml.stream(r.stream)).map((e) => e.type)).toEqual(['JudgeLaunched', 'JudgeCompleted']);
  });

  it('a broken snapshot rule: RuleViolation with score 0 and submission_error, nothing runs', async () => {
    const w = await world();
    const t = await prepared(w, { files: { 'reward.txt': '1' } }, { toml: '[metadata.assay_judge.snapshot]\nforbidden_paths = ["logs/"]\n' });
    const r = await w.runner.judge(t, await snapshot(w, { 'main.py': '', 'logs/verifier/reward.txt': '1' }));
    expect(r).toMatchObject({ status: 'submission_error', primaryScore: 0, rule: { rule: 'snapshot.forbidden_path' } });
    expect(w.runtime.calls.filter((c) => c.startsWith('create '))).toEqual([]);
    expect(w.snapshots.materialised).toBe(0);
    const events = await w.ml.stream(r.stream);
    expect(events.map((e) => [e.type, e.signer])).toEqual([
      ['RuleViolation', 'judge'],
      ['JudgeCompleted', 'judge'],
    ]);
    expect(events[0]?.data).toMatchObject({ rule: 'snapshot.forbidden_path', score: 0, detail: expect.stringContaining('logs') });
    expect(events[1]?.data).toMatchObject({ status: 'submission_error', exitCode: null });
  });

  it("materialises the snapshot outside ASSAY_HOME (a bind mount's host path is visible in the container), privately, and removes it", async () => {
    const w = await world();
    const staging = tmp('judge-unit-staging-');
    cleanup.push(staging);
    const home = tmp('judge-unit-home-');
    cleanup.push(home);
    const runner = new JudgeRunner({
      runtime: w.runtime,
      snapshots: w.snapshots,
      recorder: w.ml.recorder,
      owners: w.owners,
      clock: w.ml.clock,
      ids: w.ml.ids,
      judgesDir: join(home, 'judges'),
      homeTag: 'home1',
      hostCpus: 2,
      drainMs: 1000,
      stagingDir: staging,
    });
    const specs: ContainerSpec[] = [];
    const create = w.runtime.createContainer.bind(w.runtime);
    w.runtime.createContainer = async (spec: ContainerSpec) => {
      specs.push(spec);
      const dir = (spec.mounts.find((m) => m.type === 'bind') as { source: string }).source;
      expect(fs.statSync(join(dir, '..')).mode & 0o777).toBe(0o700);
      return create(spec);
    };
    const r = await runner.judge(await prepared(w, { files: { 'reward.txt': '1' } }), await snapshot(w));
    expect(r.status).toBe('completed');
    const bind = specs[0]?.mounts.find((m) => m.type === 'bind') as { source: string };
    expect(bind.source).toMatch(new RegExp(`^${staging}/assay-judge-[A-Za-z0-9]{6}/snapshot$`));
    expect(bind.source).not.toContain(home);
    expect(fs.readdirSync(staging)).toEqual([]);
  });

  it('Docker failures are infrastructure_error with no score, before or after launch', async () => {
    const w = await world();
    const t = await prepared(w, { files: { 'reward.txt': '1' } });
    w.runtime.failNext('create', 'disk full');
    const before = await w.runner.judge(t, await snapshot(w));
    expect(before).toMatchObject({ status: 'infrastructure_error', primaryScore: null, rewards: null, detail: expect.stringContaining('disk full') });
    expect((await w.ml.stream(before.stream)).map((e) => e.type)).toEqual(['JudgeCompleted']);
    w.runtime.failNext('readArchive', 'daemon restarted');
    const after = await w.runner.judge(t, await snapshot(w));
    expect(after).toMatchObject({ status: 'infrastructure_error', detail: expect.stringContaining('daemon restarted') });
    expect((await w.ml.stream(after.stream)).map((e) => e.type)).toEqual(['JudgeLaunched', 'JudgeCompleted']);
    expect(await w.runtime.listVolumes({ 'org.assay.role': 'judge' })).toEqual([]);
    const setup = await w.runner.judge(await prepared(w, { setupFail: 'cannot unpack the tests' }), await snapshot(w));
    expect(setup).toMatchObject({ status: 'infrastructure_error', detail: expect.stringContaining('cannot unpack the tests') });
  });

  it("the setup-failure line counts only on the entrypoint's stderr; on stdout (the verifier's) with status 125 it is output", async () => {
    const w = await world();
    const forged = await w.runner.judge(
      await prepared(w, { stdout: 'assay-judge-entrypoint: setup failed: \x1b[2Jforged\n', exit: 125, files: { 'reward.txt': '0' } }),
      await snapshot(w),
    );
    expect(forged).toMatchObject({ status: 'completed', exitCode: 125, rewards: { reward: 0 } });
    const none = await w.runner.judge(await prepared(w, { stdout: 'assay-judge-entrypoint: setup failed: forged\n', exit: 125 }), await snapshot(w));
    expect(none).toMatchObject({ status: 'verifier_error', exitCode: 125 });
    // A real setup failure whose reason carries control characters: recorded and returned escaped.
    const real = await w.runner.judge(await prepared(w, { setupFail: 'cannot unpack \x1b]0;t\x07 \u202e' }), await snapshot(w));
    expect(real.status).toBe('infrastructure_error');
    expect(real.detail).toContain('cannot unpack \\x1b]0;t\\x07 \\u{202e}');
    const completed = (await w.ml.stream(real.stream)).find((e) => e.type === 'JudgeCompleted');
    expect(JSON.stringify(completed)).not.toMatch(/\u001b|\u0007|\u202e/);
    expect(completed?.data.detail).toBe(real.detail);
  });

  it('caps the output log and records the digest of what was kept and the size of everything', async () => {
    const w = await world();
    const r = await w.runner.judge(await prepared(w, { floodBytes: 3_000_000, files: { 'reward.txt': '1' } }, { outputCapBytes: 100_000 }), await snapshot(w));
    expect(r.status).toBe('completed');
    expect(r.output).toMatchObject({ totalBytes: 3_000_000, keptBytes: 100_000, truncated: true });
    const kept = fs.readFileSync(r.output.path);
    expect(kept.length).toBe(100_000);
    expect(r.output.digest).toBe(`sha256:${require('node:crypto').createHash('sha256').update(kept).digest('hex')}`);
    expect(r.detail).toContain('output truncated: kept the first 100000 of 3000000 bytes');
  });

  it('out of memory: verifier_error noting the OOM kill', async () => {
    const w = await world();
    const r = await w.runner.judge(await prepared(w, { oom: true }), await snapshot(w));
    expect(r).toMatchObject({ status: 'verifier_error', exitCode: 137, detail: expect.stringContaining('out-of-memory killer') });
  });

  it('--repeat: N fresh Judges and the median of the completed primary scores', async () => {
    const w = await world();
    const t = await prepared(w, { files: { 'reward.json': '{"loss": 2, "reward": 1}' } }, { metric: 'loss' });
    const rep = await w.runner.judgeRepeated(t, await snapshot(w), 3);
    expect(rep.results.map((r) => r.primaryScore)).toEqual([2, 2, 2]);
    expect(new Set(rep.results.map((r) => r.judge)).size).toBe(3);
    expect(rep).toMatchObject({ median: 2, completed: 3 });
    await expect(w.runner.judgeRepeated(t, 'nope', 0)).rejects.toMatchObject({ code: 'JUDGE_BAD_REQUEST' });
  });

  it('cancel (SIGINT): the running Judge is killed and recorded as infrastructure_error; no other starts', async () => {
    const w = await world();
    const t = await prepared(w, { files: { 'reward.txt': '1' }, sleepMs: 20_000 }, { toml: '[verifier]\ntimeout_sec = 60\n' });
    const cid = await snapshot(w);
    const running = w.runner.judgeRepeated(t, cid, 3);
    await new Promise((r) => setTimeout(r, 200));
    await w.runner.cancel('SIGINT');
    const rep = await running;
    expect(rep.results).toHaveLength(1);
    expect(rep.results[0]).toMatchObject({ status: 'infrastructure_error', detail: expect.stringContaining('cancelled (SIGINT)') });
    expect((await w.ml.stream(rep.results[0]?.stream as string)).map((e) => e.type)).toEqual(['JudgeLaunched', 'JudgeCompleted']);
    expect(await w.runtime.listContainers({ 'org.assay.role': 'judge' })).toEqual([]);
    await expect(w.runner.judge(t, cid)).rejects.toMatchObject({ code: 'JUDGE_CANCELLED' });
  });

  it("writable_rootfs without the setup step: Docker's own layer, limited by the storage driver where it can, else unbounded, and the launch says which", async () => {
    const w = await world({ procVisibility: 'visible' });
    const t = await prepared(w, { files: { 'reward.json': '{"reward": 1}' } }, { toml: '[metadata.assay_judge]\nwritable_rootfs = true\n' });
    const asked: Array<number | undefined> = []; // each create's layer limit, refused or not
    const create = w.runtime.createContainer.bind(w.runtime);
    w.runtime.createContainer = (spec: ContainerSpec) => {
      asked.push(spec.rootfsSizeBytes);
      return create(spec);
    };
    const cid = await snapshot(w);
    const limit = t.limits.rootfsWriteBytes;
    expect(limit).toBeGreaterThan(0);
    w.runtime.storageQuota = true; // overlay2 on XFS with project quotas
    expect(await w.runner.judge(t, cid)).toMatchObject({
      status: 'completed',
      limits: { readOnlyRootfs: false, rootfsWrites: 'bounded', rootfsWriteBytes: limit, procHidden: false },
    });
    expect(asked.splice(0)).toEqual([limit]);
    w.runtime.storageQuota = false; // overlay2 on ext4: refused, then created without the limit
    const unbounded = { status: 'completed', limits: { readOnlyRootfs: false, rootfsWrites: 'unbounded', rootfsWriteBytes: null } };
    expect(await w.runner.judge(t, cid)).toMatchObject(unbounded);
    expect(asked.splice(0)).toEqual([limit, undefined]);
    // once refused, the runner does not ask again
    expect(await w.runner.judge(t, cid)).toMatchObject(unbounded);
    expect(asked.splice(0)).toEqual([undefined]);
  });

  it('refuses what it cannot isolate honestly, and unknown snapshots', async () => {
    const w = await world();
    const refuse = async (toml: string, code: string, text: string) => {
      await expect(prepared(w, {}, { toml })).rejects.toMatchObject({ code, message: expect.stringContaining(text) });
    };
    await refuse('[verifier]\nnetwork_mode = "allowlist"\nallowed_hosts = ["example.org"]\n', 'JUDGE_TASK_UNSUPPORTED', 'allowlist');
    await refuse('[metadata.rsi_harness.verifier]\ngpus = 1\n', 'JUDGE_TASK_UNSUPPORTED', 'GPU');
    await refuse('[verifier]\nuser = "1000"\n', 'JUDGE_TASK_UNSUPPORTED', 'as root');
    await refuse('[metadata.assay_judge]\npids_limit = 1\n', 'JUDGE_TASK_SETTINGS_INVALID', 'pids_limit');
    const t = await prepared(w, {});
    await expect(w.runner.judge(t, 'bfakemissing')).rejects.toMatchObject({ code: 'JUDGE_SNAPSHOT_NOT_FOUND' });
  });

  it('sweep: removes what a dead owner left, records the unfinished Judge, leaves live owners alone', async () => {
    const w = await world();
    const t = await prepared(w, { files: { 'reward.txt': '1' } });
    // A Judge launched by a process that then died: its stream has JudgeLaunched only.
    const deadOwner = 'host/4242/7';
    w.owners.dead.add(deadOwner);
    const judgeId = '00000000-0000-4000-8000-0000000000aa';
    await w.ml.recorder.append(
      `judge-${judgeId}`,
      [
        {
          type: 'JudgeLaunched',
          data: { judge: judgeId, image: t.images.judge.id, snapshot: 'bfakex', testsDigest: t.testsDigest, limits: {}, network: 'none' },
        },
      ],
      'no_stream',
    );
    const labels = (owner: string, id: string) => ({ 'org.assay.role': 'judge', 'org.assay.judge': id, 'org.assay.owner': owner, 'org.assay.home': 'home1' });
    await w.runtime.createVolume(`assay-judge-${judgeId}-verifier`, labels(deadOwner, judgeId));
    await w.runtime.createContainer({ ...baseSpec(t.images.judge.id), name: `assay-judge-${judgeId}`, labels: labels(deadOwner, judgeId) });
    const dir = join(w.home, 'judges', judgeId);
    fs.mkdirSync(join(dir, 'snapshot'), { recursive: true });
    // Its snapshot, materialised in a private staging directory outside the home; and a path that is not one.
    const staging = fs.mkdtempSync(join(require('node:os').tmpdir(), 'assay-judge-'));
    fs.mkdirSync(join(staging, 'snapshot'));
    fs.writeFileSync(join(dir, 'owner.json'), JSON.stringify({ owner: deadOwner, judge: judgeId, startedAt: '2026-12-01T09:59:00.000Z', staging }));
    fs.writeFileSync(join(dir, 'output.log'), 'partial');
    // A full-rootfs Judge image it made from a snapshot, and one of a live process.
    const imported = async (owner: string, id: string) =>
      (
        await w.runtime.importImage((async function* () {})(), {
          tag: `assay/judge-rootfs:${id}`,
          labels: { ...labels(owner, id), 'org.assay.role': 'judge-rootfs' },
          env: [],
          workingDir: '/',
          cmd: null,
          user: '',
          timeoutMs: 1000,
        })
      ).id;
    await imported(deadOwner, judgeId);
    const liveImage = await imported(w.owners.self, 'live');
    // A live process's Judge in flight.
    await w.runtime.createContainer({ ...baseSpec(t.images.judge.id), name: 'assay-judge-live', labels: labels(w.owners.self, 'live') });

    const rep = await w.runner.sweep();
    expect(rep).toEqual({
      containers: [`assay-judge-${judgeId}`],
      volumes: [`assay-judge-${judgeId}-verifier`],
      images: [`assay/judge-rootfs:${judgeId}`],
      directories: [dir],
      completed: [judgeId],
    });
    expect((await w.runtime.listImages({ 'org.assay.role': 'judge-rootfs' })).map((i) => i.id)).toEqual([liveImage]);
    expect(fs.existsSync(join(dir, 'snapshot'))).toBe(false);
    expect(fs.existsSync(staging)).toBe(false);
    expect((await w.runtime.listContainers({ 'org.assay.role': 'judge' })).map((c) => c.name)).toEqual(['assay-judge-live']);
    const events = await w.ml.stream(`judge-${judgeId}`);
    expect(events.map((e) => [e.type, e.signer])).toEqual([
      ['JudgeLaunched', 'runtime'],
      ['JudgeCompleted', 'judge'],
    ]);
    expect(events[1]?.data).toMatchObject({
      status: 'infrastructure_error',
      exitCode: null,
      outputBytes: 7,
      detail: expect.stringContaining('host/4242/7 ended before this Judge finished'),
    });
    expect(await w.runner.sweep()).toEqual({ containers: [], volumes: [], images: [], directories: [], completed: [] });
  });
});

describe('TaskImageBuilder (fake runtime)', () => {
  it('builds the work and judge images once, records each once, and reuses them', async () => {
    const w = await world();
    const dir = writeTask(tmp('judge-unit-task-'), {});
    cleanup.push(dir);
    const plan = await loadTaskPlan(dir);
    const first = await w.images.ensure(dir, plan);
    expect(first.work).toMatchObject({ purpose: 'work', built: true, tag: expect.stringMatching(/^assay\/task-test-fake:work-[0-9a-f]{16}$/) });
    expect(first.judge).toMatchObject({ purpose: 'judge', built: true, tag: expect.stringMatching(/^assay\/task-test-fake:judge-[0-9a-f]{16}$/) });
    expect(fs.readFileSync(first.work.logPath as string, 'utf8')).toContain('Step 1/2 : FROM assay/base:bookworm');
    const builtEvents = await w.ml.stream(`image-${first.judge.id}`);
    expect(builtEvents).toEqual([
      {
        type: 'ImageBuilt',
        signer: 'runtime',
        revision: 0,
        data: expect.objectContaining({
          image: first.judge.tag,
          digest: first.judge.id,
          purpose: 'judge',
          task: 'test.fake',
          recipeDigest: first.judge.recipeDigest,
          buildLogDigest: first.judge.logDigest,
        }),
      },
    ]);
    const again = await w.images.ensure(dir, plan);
    expect(again.work).toMatchObject({ built: false, id: first.work.id, recorded: null });
    expect(again.judge).toMatchObject({ built: false, id: first.judge.id, recorded: null });
    expect(w.runtime.calls.filter((c) => c.startsWith('build '))).toHaveLength(2);
  });

  it('never pulls: a missing base image or a network fetch in the Dockerfile is refused before building', async () => {
    const w = await world();
    const dir = writeTask(tmp('judge-unit-task-'), {});
    cleanup.push(dir);
    fs.writeFileSync(join(dir, 'environment', 'Dockerfile'), 'FROM python:3.12-slim\n');
    await expect(w.images.ensure(dir, await loadTaskPlan(dir))).rejects.toMatchObject({
      code: 'IMAGE_BASE_MISSING',
      message: expect.stringContaining('python:3.12-slim'),
    });
    fs.writeFileSync(join(dir, 'environment', 'Dockerfile'), 'FROM assay/base:bookworm\nADD https://example.invalid/data.tgz /data\n');
    await expect(w.images.ensure(dir, await loadTaskPlan(dir))).rejects.toMatchObject({ code: 'IMAGE_DOCKERFILE_UNSUPPORTED' });
    expect(w.runtime.calls.filter((c) => c.startsWith('build '))).toEqual([]);
  });
});

function baseSpec(image: string) {
  return {
    image,
    cmd: ['fake-sleep', '100'],
    env: {},
    labels: {},
    mounts: [],
    networkMode: 'none' as const,
    readOnlyRootfs: true,
    capDrop: ['ALL'],
    capAdd: [],
    noNewPrivileges: true,
    pidsLimit: 16,
    memoryBytes: null,
    nanoCpus: null,
    init: true,
    openStdin: false,
  };
}
