/**
 * The whole GEMM task through `assay run` (runResearch, in process) on a machine without a GPU: real Docker, a real
 * Work container, fresh Judges running the task's own judge.py, policy.py and run-as-candidate, the signing ledger.
 * What stands in for the GPU: SimulatedGpuDockerRuntime (device requests checked and reported, not sent to the
 * daemon), FakeGpuProbe / FakeGpuRuntimeCheck (the host facts), and the fake nvcc / nvidia-smi of
 * tests/fixtures/fake-gpu in the task's image in place of the CUDA toolkit (the image is otherwise the task's own:
 * its Dockerfile with `FROM assay/base:bookworm` for `FROM assay/cuda:bookworm`). With one GPU (`--gpus 0`) the
 * Judge borrows Work's GPU while Work stays paused.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SimulatedGpuDockerRuntime } from '../../libs/containers/src/testing';
import { FakeGpuProbe, FakeGpuRuntimeCheck } from '@assay/run';
import { runResearch } from '../../libs/runtime/src/run-runtime';
import { checkTask } from '../../libs/runtime/src/task-check';
import { assay } from '../support/cli';
import { REPO_ROOT } from '../support/child-process';
import { describeDocker } from '../support/docker';
import { homeEvents } from '../run/support/home-events';

jest.setTimeout(600_000);

/** The agent: four submissions. The starting kernel; a kernel that prints (policy); a faster one; one whose runner
 * finds no GPU (an infrastructure fault: refunded). JUDGE_VERSION ends on the fast one. */
const AGENT = `cd "$ASSAY_WORKSPACE"
rsi-submit > /dev/null; echo "submit1=$?"
{ cat kernels/tiled.cu; printf '\\n__global__ void leak() { printf("ASSAY"); }\\n'; } > kernels/leak.cu; echo leak > JUDGE_VERSION
rsi-submit > /dev/null; echo "submit2=$?"
{ echo '// FAKE-GPU: tflops=25'; cat kernels/tiled.cu; } > kernels/fast.cu; echo fast > JUDGE_VERSION
rsi-submit > /dev/null; echo "submit3=$?"
{ echo '// FAKE-GPU: no-gpu'; cat kernels/tiled.cu; } > kernels/nogpu.cu; echo nogpu > JUDGE_VERSION
rsi-submit > /dev/null; echo "submit4=$?"
echo fast > JUDGE_VERSION
`;

/** A copy of the task whose image has the fake toolchain in place of the CUDA toolkit, sized for this machine. */
function fakeGpuTask(root: string): string {
  const task = join(root, 'gemm-fp16');
  cpSync(join(REPO_ROOT, 'cuda/gemm-fp16'), task, { recursive: true });
  cpSync(join(REPO_ROOT, 'tests/fixtures/fake-gpu/bin'), join(task, 'environment/fake-gpu'), { recursive: true });
  const dockerfile = join(task, 'environment/Dockerfile');
  const original = readFileSync(dockerfile, 'utf8');
  expect(original).toMatch(/^FROM assay\/cuda:bookworm$/m);
  writeFileSync(dockerfile, original.replace(/^FROM assay\/cuda:bookworm$/m, 'FROM assay/base:bookworm\nCOPY fake-gpu/ /usr/local/bin/'));
  // this machine's 2 cores: the task asks 4 CPUs and 16 GiB for Work
  const toml = join(task, 'task.toml');
  writeFileSync(toml, readFileSync(toml, 'utf8').replace('cpus = 4', 'cpus = 1').replace('memory_mb = 16384', 'memory_mb = 2048'));
  return task;
}

describeDocker('assay task check of the GEMM task, with a fake GPU', () => {
  let root: string;
  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'assay-gemm-check-'));
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('is sound with --gpus: the start and the WMMA oracle judged on the GPU, the oracle better; without GPUs the build check says what is missing', async () => {
    const task = fakeGpuTask(root);
    // the fake GPU's figure for the oracle: the solution's kernel, marked (a real GPU measures it)
    const wmma = join(task, 'solution/kernels/wmma.cu');
    writeFileSync(wmma, `// FAKE-GPU: tflops=120\n${readFileSync(wmma, 'utf8')}`);
    const containers = new SimulatedGpuDockerRuntime();
    const rep = await checkTask(task, { gpus: ['0'], containers, gpuRuntimeCheck: new FakeGpuRuntimeCheck(), repeat: 2 });
    expect(rep.checks.filter((c) => c.status === 'failed')).toEqual([]);
    expect(rep.sound).toBe(true);
    expect(rep.judges.start.map((j) => j.score)).toEqual([10, 10]);
    expect(rep.judges.oracle.map((j) => j.score)).toEqual([120, 120]);
    expect(containers.requests.filter((r) => r.endsWith(' 0')).length).toBe(4);

    const none = await checkTask(task, { containers: new SimulatedGpuDockerRuntime(), repeat: 1 });
    expect(none.sound).toBe(false);
    expect(none.checks.find((c) => c.name === 'build')).toEqual({
      name: 'build',
      status: 'failed',
      detail: 'the verifier needs 1 GPU(s) (metadata.rsi_harness.verifier.gpus) and --gpus gives 0; pass --gpus LIST (e.g. --gpus 0) on a GPU host',
    });
    const noToolkit = await checkTask(task, { gpus: ['0'], gpuRuntimeCheck: new FakeGpuRuntimeCheck({ Runtimes: { runc: {} } }), repeat: 1 });
    expect(noToolkit.checks.find((c) => c.name === 'build')).toMatchObject({ status: 'failed', detail: expect.stringMatching(/NVIDIA Container Toolkit/) });
  });
});

describeDocker('the GEMM task through assay run, with a fake GPU', () => {
  let root: string;
  let home: string;
  let task: string;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'assay-gemm-run-'));
    home = join(root, 'home');
    task = fakeGpuTask(root);
    const r = await assay(['ledger', 'init', '--origin', 'assay.test/gemm-run'], home);
    expect(r.code).toBe(0);
  }, 60_000);

  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('judges every submission with the task Judge: measured, policy 0, the best selected, the infrastructure fault refunded, GPU-seconds recorded', async () => {
    const containers = new SimulatedGpuDockerRuntime();
    const logs: string[] = [];
    const agentOut: Buffer[] = [];
    const rep = await runResearch({
      home,
      taskDir: task,
      agent: `command:${AGENT}`,
      runId: 'gemm1',
      gpus: ['0'],
      containers,
      gpuRuntimeCheck: new FakeGpuRuntimeCheck(),
      gpuProbe: FakeGpuProbe.withGpus(1),
      snapshotIntervalSec: 0,
      log: (l) => logs.push(l),
      agentOutput: (c) => agentOut.push(c),
    });
    const out = Buffer.concat(agentOut).toString('utf8');
    expect(out).toMatch(/submit1=0/);
    expect(rep.rounds.map((x) => [x.round, x.status, x.score])).toEqual([
      [1, 'completed', 10],
      [2, 'completed', 0],
      [3, 'completed', 25],
      [4, 'refunded', null],
    ]);
    expect(rep).toMatchObject({ status: 'completed', bestRound: 3, bestScore: 25, agentExitCode: 0 });
    expect(logs.join('\n')).toMatch(/GPUs: Work 0, each Judge 0 \(hand-over: Work stays paused while a Judge runs\)/);

    // Work and each of the four Judges asked for GPU 0; the daemon was never sent a device request
    expect(containers.requests.filter((r) => r.startsWith('assay-work-'))).toHaveLength(1);
    expect(containers.requests.filter((r) => !r.startsWith('assay-work-'))).toHaveLength(4);
    expect(containers.requests.every((r) => r.endsWith(' 0'))).toBe(true);

    const events = await homeEvents(home, 'run-gemm1');
    const types = events.map((e) => e.type);
    expect(types.slice(0, 2)).toEqual(['RunStarted', 'GpusProbed']);
    expect(events[1]?.data).toMatchObject({ gpus: [{ device: '0', model: 'NVIDIA H200', memoryMiB: 143771 }] });
    const gpuSeconds = events.filter((e) => e.type === 'BudgetConsumed' && e.data.budget === 'gpu_seconds');
    // three settled Judges hold GPU-seconds (the refunded round records none), and Work's own
    expect(gpuSeconds.filter((e) => e.data.holder === 'judge').map((e) => e.data.round)).toEqual([1, 2, 3]);
    expect(gpuSeconds.some((e) => e.data.holder === 'work')).toBe(true);
    for (const e of gpuSeconds) expect(e.data).toMatchObject({ gpus: ['0'], amount: expect.any(Number) });
    expect(types).toContain('RunCompleted');
    // `assay run status` ties the figures to the hardware the run was given
    const st = await assay(['run', 'status', 'gemm1'], home);
    expect(st.code).toBe(0);
    expect(st.stdout).toMatch(/^gpus {6}0 = NVIDIA H200 143771 MiB on \S+, driver 550\.54\.15, CUDA 12\.4 \(probed \d{4}-/m);
    const stJson = await assay(['run', 'status', 'gemm1', '--json'], home);
    expect((JSON.parse(stJson.stdout) as { gpus: unknown }).gpus).toMatchObject({ gpus: [{ device: '0', model: 'NVIDIA H200', memoryMiB: 143771, driver: '550.54.15', cuda: '12.4' }] });

    // the Judges' own words: the candidate fault's reason and the infrastructure fault's
    const judges = await homeEvents(home);
    const completed = judges.filter((e) => e.type === 'JudgeCompleted').map((e) => [e.data.status, e.data.detail ?? null]);
    expect(completed).toEqual([
      ['completed', null],
      ['completed', null],
      ['completed', null],
      ['infrastructure_error', expect.stringMatching(/^the verifier reported an infrastructure fault: repeat 1: gemm-runner: no usable GPU.*; the runner's self-test failed too/)],
    ]);
    const launched = judges.filter((e) => e.type === 'JudgeLaunched').map((e) => (e.data.limits as { gpus?: unknown }).gpus);
    expect(launched).toEqual([['0'], ['0'], ['0'], ['0']]);
    const round2 = readFileSync(join(rep.dir, 'logs', 'round-2.log'), 'utf8');
    expect(round2).toMatch(/candidate fault \(policy\): the submission breaks the source policy/);
    expect(round2).toMatch(/kernels\/leak\.cu:\d+: printing/);
    const round3 = readFileSync(join(rep.dir, 'logs', 'round-3.log'), 'utf8');
    expect(round3).toMatch(/built for sm_90a/);
    expect(round3).toMatch(/median of 5 repeats: 25\.00 TFLOP\/s/);
  });
});

/** With the CUDA toolkit on this machine: the task as shipped (FROM assay/cuda:bookworm, the real nvcc). */
const HAS_NVCC = existsSync('/usr/local/cuda/bin/nvcc');
(HAS_NVCC || process.env.ASSAY_REQUIRE_NVCC === '1' ? describeDocker : describe.skip)('the GEMM task as shipped, real nvcc, no GPU', () => {
  let root: string;
  let home: string;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'assay-gemm-real-'));
    home = join(root, 'home');
    // assay/cuda:bookworm from this machine's toolkit (idempotent)
    const b = spawnSync('bash', [join(REPO_ROOT, 'cuda/build-cuda-image.sh')], { encoding: 'utf8', timeout: 300_000 });
    expect({ status: b.status, out: `${b.stdout}${b.stderr}`.slice(-2000) }).toMatchObject({ status: 0 });
    const r = await assay(['ledger', 'init', '--origin', 'assay.test/gemm-real'], home);
    expect(r.code).toBe(0);
  }, 320_000);

  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('the Judge compiles the kernel with nvcc for sm_90a as the candidate user, then finds no GPU: an infrastructure fault, refunded', async () => {
    const task = join(root, 'gemm-fp16');
    cpSync(join(REPO_ROOT, 'cuda/gemm-fp16'), task, { recursive: true });
    const toml = join(task, 'task.toml');
    writeFileSync(toml, readFileSync(toml, 'utf8').replace('cpus = 4', 'cpus = 1').replace('memory_mb = 16384', 'memory_mb = 2048'));
    // no nvidia-smi without a driver: the Judge is told the GPU is a Hopper, so it builds for sm_90a as on an H100
    writeFileSync(join(task, 'environment/nvidia-smi'), readFileSync(join(REPO_ROOT, 'tests/fixtures/fake-gpu/bin/nvidia-smi')), { mode: 0o755 });
    const dockerfile = join(task, 'environment/Dockerfile');
    writeFileSync(dockerfile, `${readFileSync(dockerfile, 'utf8')}COPY nvidia-smi /usr/local/bin/nvidia-smi\n`);
    const rep = await runResearch({
      home,
      taskDir: task,
      agent: 'command:rsi-submit > /dev/null; echo "submit=$?"',
      runId: 'real1',
      gpus: ['0'],
      containers: new SimulatedGpuDockerRuntime(),
      gpuRuntimeCheck: new FakeGpuRuntimeCheck(),
      gpuProbe: FakeGpuProbe.withGpus(1),
      snapshotIntervalSec: 0,
    });
    expect(rep.rounds.map((x) => [x.round, x.status])).toEqual([[1, 'refunded']]);
    const completed = (await homeEvents(home)).filter((e) => e.type === 'JudgeCompleted');
    expect(completed.map((e) => [e.data.status, e.data.detail])).toEqual([
      ['infrastructure_error', expect.stringMatching(/^the verifier reported an infrastructure fault: repeat 1: gemm-runner: no usable GPU: .*; the runner's self-test failed too; test.sh exited with status 4$/)],
    ]);
    const log = readFileSync(join(rep.dir, 'logs', 'round-1.log'), 'utf8');
    expect(log).toMatch(/kernel tiled on NVIDIA H200 \(fake\) \(compute capability 9\.0\), built for sm_90a/);
    expect(log).toMatch(/infrastructure fault \(no reward; the round is refunded\)/);
    expect(log).not.toMatch(/does not compile/);
  });
});
