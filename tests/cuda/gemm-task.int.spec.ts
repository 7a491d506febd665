/**
 * The FP16 GEMM task without a GPU (cuda/README.md): the task validates; the source policy refuses what it must and
 * accepts real kernels; the Judge (judge.py, run here with python3) walks every path with the fake GPU toolchain of
 * tests/fixtures/fake-gpu: measured (median of five fresh processes), candidate faults scoring 0 with the reason,
 * infrastructure faults writing no reward and exiting non-zero. With nvcc on the machine, the runner and the
 * starting kernel also compile for sm_90a (`.ci/run` compiles every .cu through cuda/build.sh).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readJudgeSettings } from '@assay/judge';
import { readRunTaskSettings } from '@assay/run';
import { loadTaskPlan, mergeRunSettings, validateTaskDir } from '@assay/task-format';

jest.setTimeout(120_000);

const REPO = join(__dirname, '../..');
const TASK = join(REPO, 'examples/tasks/gemm-fp16');
const RUNNER = join(REPO, 'cuda/gemm-fp16/environment/runner');
const START = join(REPO, 'cuda/gemm-fp16/environment/workspace/kernels/tiled.cu');
const CHECK = join(REPO, 'cuda/check');
const FAKE_BIN = join(REPO, 'tests/fixtures/fake-gpu/bin');
const TILED = readFileSync(START, 'utf8');

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'assay-gemm-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let n = 0;
/** A submission: JUDGE_VERSION plus kernels/ files (and any other top-level files). */
function submission(kernels: Record<string, string>, extra: Record<string, string> = {}, version = Object.keys(kernels)[0]?.replace(/\.cu$/, '') ?? 'k'): string {
  n += 1;
  const ws = join(dir, `ws${n}`);
  mkdirSync(join(ws, 'kernels'), { recursive: true });
  writeFileSync(join(ws, 'JUDGE_VERSION'), `${version}\n`);
  for (const [k, v] of Object.entries(kernels)) writeFileSync(join(ws, 'kernels', k), v);
  for (const [k, v] of Object.entries(extra)) writeFileSync(join(ws, k), v);
  return ws;
}

function policy(ws: string): { status: number | null; out: string } {
  const r = spawnSync('python3', ['-I', join(RUNNER, 'policy.py'), ws], { encoding: 'utf8' });
  return { status: r.status, out: r.stdout + r.stderr };
}

/** A kernel source around `body` (inside assay_gemm_fp16) and `top` (file scope). */
const kernel = (top: string, body = '') =>
  `#include "gemm.h"\n${top}\nvoid assay_gemm_fp16(const __half* A, const __half* B, __half* C, int M, int N, int K, void* workspace, cudaStream_t stream) {\n${body}\n}\n`;

describe('the task', () => {
  it('validates as a Harbor task with one GPU for Work and one for each Judge', async () => {
    expect((await validateTaskDir(TASK)).problems).toEqual([]);
    const plan = await loadTaskPlan(TASK);
    expect(plan.name).toBe('assay/gemm-fp16');
    expect(plan.environment).toMatchObject({ gpus: 1, workdir: '/workspace', network: { mode: 'no-network' } });
    expect(plan.verifier.gpus).toBe(1);
    expect(mergeRunSettings(plan.runSettings)).toMatchObject({ primaryMetric: 'reward', direction: 'maximize', gpuBudgetSec: 28800 });
    expect(readJudgeSettings(plan.metadata)).toMatchObject({ ok: true, value: { snapshot: { allowedPaths: ['JUDGE_VERSION', 'NOTES.md', 'kernels/'], symlinks: 'forbid' } } });
    expect(readRunTaskSettings(plan.metadata)).toEqual({ ok: true, value: { editablePaths: ['JUDGE_VERSION', 'NOTES.md', 'kernels/'] } });
    expect(readFileSync(join(TASK, 'environment/Dockerfile'), 'utf8')).toMatch(/^COPY runner\/ \/opt\/assay-gemm\/$/m);
    expect(readFileSync(join(TASK, 'tests/test.sh'), 'utf8')).toMatch(/^exec python3 -I \/opt\/assay-gemm\/judge.py$/m);
  });
});

describe('the source policy', () => {
  it('accepts the starting kernel, the task workspace as shipped, and real kernels (WMMA, PTX mma, headers, pipelines)', () => {
    const ptx = kernel(
      `#include <cstdint>
#include "frag.cuh"
__global__ void k(const __half* A, __half* C) {
  extern __shared__ __align__(16) unsigned char smem[];
  uint32_t a0, a1, a2, a3, addr = 0;
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\\n" : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(addr));
  asm volatile("{\\n .reg .pred p;\\n setp.eq.u32 p, %0, 0;\\n @p bra DONE;\\n cp.async.cg.shared.global [%0], [%1], 16;\\n cp.async.commit_group;\\n DONE:\\n}\\n" :: "r"(addr), "l"(A));
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};" : "+f"(x), "+f"(y), "+f"(z), "+f"(w) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(a0), "r"(a1));
  Frag f; f.read = 1; f.write = smem[0]; (void)C;
}`,
      'cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 99 * 1024);\nk<<<1, 128, 99 * 1024, stream>>>(A, C);\nif (cudaGetLastError() != cudaSuccess) return;',
    );
    const pipeline = kernel(
      `#include <cuda/pipeline>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
#define TILE 64
#define IDX(r, c, ld) ((r) * (ld) + (c))
__global__ void k(const __half* A, __half* C, int n) {
  auto block = cg::this_thread_block();
  __shared__ __half s[TILE * TILE];
#pragma unroll 4
  for (int i = threadIdx.x; i < TILE * TILE; i += blockDim.x) s[i] = A[IDX(i / TILE, i % TILE, n)];
  block.sync();
  C[threadIdx.x] = s[threadIdx.x];
}`,
      'k<<<1, 64, 0, stream>>>(A, C, N); cudaMemsetAsync(workspace, 0, 1024, stream);',
    );
    const cases: Array<[string, string]> = [
      ['starting kernel (tiled.cu)', submission({ 'tiled.cu': TILED })],
      ['the WMMA solution', submission({ 'wmma.cu': readFileSync(join(REPO, 'cuda/gemm-fp16/solution/kernels/wmma.cu'), 'utf8') }, { 'NOTES.md': '# tried wmma\n' })],
      ['the wrong kernel (its fault is numbers, not source)', submission({ 'wrong.cu': readFileSync(join(CHECK, 'wrong.cu'), 'utf8') })],
      // the hostile kernels of check-on-gpu.sh: their faults are at run time, so the policy must let them through to the gates
      ...['oob', 'hang', 'stale', 'sticky'].map((k): [string, string] => [`the hostile kernel ${k}.cu`, submission({ [`${k}.cu`]: readFileSync(join(CHECK, `${k}.cu`), 'utf8') }, {}, k)]),
      ['inline PTX, a local header, dynamic shared memory', submission({ 'ptx.cu': ptx, 'frag.cuh': 'struct Frag { int read; int write; };\n' })],
      ['libcu++ pipeline, cooperative groups, macros, several versions', submission({ 'v2.cu': pipeline, 'tiled.cu': TILED }, {}, 'v2')],
    ];
    for (const [what, ws] of cases) expect([what, policy(ws)]).toEqual([what, { status: 0, out: expect.stringMatching(/^ok [a-z0-9]+\n$/) }]);
    expect(policy(join(TASK, 'environment/workspace'))).toEqual({ status: 0, out: 'ok tiled\n' });
  });

  const refused: Array<[string, () => string, RegExp]> = [
    ['cuBLAS', () => submission({ 'k.cu': kernel('', 'cublasHandle_t h; cublasCreate(&h);') }), /a library that does the work \(cublasHandle_t\)/],
    ['a cuBLAS header', () => submission({ 'k.cu': `#include <cublas_v2.h>\n${kernel('')}` }), /#include <cublas_v2.h> is not on the allowed list/],
    ['CUTLASS', () => submission({ 'k.cu': kernel('using G = cutlass::gemm::device::Gemm<>;') }), /library that does the work \(cutlass\)/],
    ['CuTe', () => submission({ 'k.cu': kernel('', 'auto t = cute::make_tensor(A);') }), /library that does the work \(cute\)/],
    ['cuDNN', () => submission({ 'k.cu': kernel('', 'cudnnHandle_t h;') }), /library that does the work \(cudnnHandle_t\)/],
    ['printf (device or host)', () => submission({ 'k.cu': kernel('__global__ void g() { printf("hi"); }') }), /printing .*: printf is refused/],
    ['std::cout', () => submission({ 'k.cu': kernel('', 'std::cout << 1;') }), /I\/O: cout is refused/],
    ['a forged result line in a string', () => submission({ 'k.cu': kernel('static const char* s = "ASSAY-GEMM-RESULT 00 {}";') }), /looks like the runner's result line/],
    ['fopen', () => submission({ 'k.cu': kernel('', 'auto f = fopen("/tests/x", "r");') }), /file, network or environment I\/O: fopen is refused/],
    ['getenv', () => submission({ 'k.cu': kernel('', 'auto e = getenv("X");') }), /getenv is refused/],
    ['system()', () => submission({ 'k.cu': kernel('', 'system("id");') }), /process control: system is refused/],
    ['fork', () => submission({ 'k.cu': kernel('', 'fork();') }), /process control: fork is refused/],
    ['exit', () => submission({ 'k.cu': kernel('', 'exit(0);') }), /process control: exit is refused/],
    ['std::thread', () => submission({ 'k.cu': kernel('', 'std::thread t([]{});') }), /::thread is refused/],
    ['a socket', () => submission({ 'k.cu': kernel('', 'int s = socket(2, 1, 0);') }), /socket is refused/],
    ['an extra stream', () => submission({ 'k.cu': kernel('', 'cudaStream_t s2; cudaStreamCreate(&s2);') }), /extra streams, events or graphs: cudaStreamCreate is refused/],
    ['an event', () => submission({ 'k.cu': kernel('', 'cudaEvent_t e; cudaEventCreate(&e);') }), /extra streams, events or graphs: cudaEvent_t is refused/],
    ['the per-thread default stream', () => submission({ 'k.cu': kernel('', 'g<<<1, 1, 0, cudaStreamPerThread>>>();') }), /cudaStreamPerThread is refused/],
    ['cudaMalloc', () => submission({ 'k.cu': kernel('', 'void* p; cudaMalloc(&p, 1);') }), /outside the kernel's allowance .*cudaMalloc is refused/],
    ['a copy to the host', () => submission({ 'k.cu': kernel('', 'cudaMemcpyAsync(0, C, 2, cudaMemcpyDeviceToHost, stream);') }), /cudaMemcpyDeviceToHost is refused/],
    ['the driver API', () => submission({ 'k.cu': kernel('', 'CUfunction f; cuLaunchKernel(f, 1,1,1,1,1,1,0,0,0,0);') }), /the CUDA driver API \(CUfunction\) is refused/],
    ['dlopen', () => submission({ 'k.cu': readFileSync(join(CHECK, 'breach.cu'), 'utf8') }), /dlopen is refused/],
    ['inline PTX that calls out', () => submission({ 'k.cu': kernel('__global__ void g() { asm volatile("call.uni foo;"); }') }), /inline PTX instruction 'call.uni' escapes the policy/],
    ['inline PTX that reads the global timer', () => submission({ 'k.cu': kernel('__global__ void g() { unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); }') }), /reads a timer/],
    ['an inline PTX directive', () => submission({ 'k.cu': kernel('__global__ void g() { asm(".global .u32 x;"); }') }), /directive '.global' escapes the policy/],
    ['inline assembly whose text is not a literal', () => submission({ 'k.cu': kernel('#define P "trap;"\n__global__ void g() { asm(P); }') }), /text is not a string literal/],
    ['token pasting', () => submission({ 'k.cu': kernel('#define J(a, b) a##b\n__global__ void g() { J(pri, ntf)("x"); }') }), /token pasting/],
    ['stringizing', () => submission({ 'k.cu': kernel('#define S(a) #a\n') }), /stringizing/],
    ['a name split by a line continuation', () => submission({ 'k.cu': kernel('__global__ void g() { pri\\\nntf("x"); }') }), /printf is refused/],
    ['a constructor attribute', () => submission({ 'k.cu': kernel('__attribute__((constructor)) static void early() {}') }), /__attribute__ is refused/],
    ['an extern declaration', () => submission({ 'k.cu': kernel('extern int g_out;') }), /extern is refused/],
    ['main', () => submission({ 'k.cu': kernel('int main() { return 0; }') }), /main is refused/],
    ['a function pointer', () => submission({ 'k.cu': kernel('', 'auto f = reinterpret_cast<void (*)()>(0x1000); f();') }), /function pointer types are refused/],
    ['host allocation', () => submission({ 'k.cu': kernel('', 'float* p = new float[4]; free(p);') }), /host memory allocation .*: new is refused/],
    ['a raw string', () => submission({ 'k.cu': kernel('const char* s = R"(x)";') }), /raw string literals are refused/],
    ['_Pragma', () => submission({ 'k.cu': kernel('_Pragma("GCC diagnostic ignored")') }), /_Pragma is refused/],
    ['a #pragma other than unroll', () => submission({ 'k.cu': `#pragma GCC optimize("O0")\n${kernel('')}` }), /#pragma GCC .* is refused/],
    ['#include_next', () => submission({ 'k.cu': `#include_next <cuda_runtime.h>\n${kernel('')}` }), /directive #include_next is refused/],
    ['an include that leaves kernels/', () => submission({ 'k.cu': `#include "../NOTES.md"\n${kernel('')}` }), /only "gemm.h" and headers in kernels/],
    ['an include through a macro', () => submission({ 'k.cu': `#define H <cstdio>\n#include H\n${kernel('')}` }), /must name a header literally/],
    ['the runner names', () => submission({ 'k.cu': kernel('', 'assay_result_fd = 1;') }), /names of the runner \(assay_result_fd\)/],
    ['a universal character name', () => submission({ 'k.cu': kernel('', '\\u0070rintf("x");') }), /universal character names/],
    ['a compiler builtin that prints', () => submission({ 'k.cu': kernel('', '__builtin_printf("x");') }), /compiler builtin __builtin_printf is refused/],
    ['libc internals', () => submission({ 'k.cu': kernel('', '__libc_write(1, "x", 1);') }), /libc internals \(__libc_write\)/],
    ['non-ASCII (homoglyphs)', () => submission({ 'k.cu': kernel('// fine comment\nint \u0440rintf;') }), /non-ASCII characters are refused/],
    ['an unterminated comment', () => submission({ 'k.cu': `${kernel('')}/* never closed` }), /cannot read the source here/],
    ['a symlink', () => {
      const ws = submission({ 'k.cu': kernel('') });
      symlinkSync('/etc/passwd', join(ws, 'kernels', 'x.cuh'));
      return ws;
    }, /kernels\/x.cuh: is a symlink/],
    ['a build file outside the surface', () => submission({ 'k.cu': kernel('') }, { Makefile: 'all:\n' }), /Makefile: outside the allowed surface/],
    ['a gemm.h of its own', () => submission({ 'k.cu': kernel(''), 'gemm.h': '#pragma once\n' }), /kernels\/gemm.h: outside the allowed surface/],
    ['a JUDGE_VERSION naming no kernel', () => submission({ 'k.cu': kernel('') }, {}, 'missing'), /names missing, but kernels\/missing.cu is not in the submission/],
    ['a JUDGE_VERSION that is a path', () => submission({ 'k.cu': kernel('') }, {}, '../../etc/passwd'), /expected one kernel name/],
  ];
  it(`refuses ${refused.length} kinds of breach, naming the file, line and reason`, () => {
    for (const [what, make, why] of refused) {
      const r = policy(make());
      expect([what, r.status]).toEqual([what, 1]);
      expect([what, r.out]).toEqual([what, expect.stringMatching(why)]);
      expect(r.out).toMatch(/^refused: (kernels\/|JUDGE_VERSION|Makefile)/m);
    }
  });

  it('a member or variable that merely contains a refused word is fine; a refused name as a member call is not confused with it', () => {
    const ws = submission({ 'k.cu': kernel('struct S { int read; int write; int exit; };\n__global__ void g(S s) { s.read = s.write + s.exit; int printfish = threadIdx.x; (void)printfish; }') });
    expect(policy(ws)).toEqual({ status: 0, out: 'ok k\n' });
  });
});

interface JudgeRun {
  status: number | null;
  out: string;
  reward: Record<string, number> | null;
  infra: string | null;
  report: Record<string, unknown>;
  nvcc: Array<{ argv: string[]; cwd: string }>;
}

/** judge.py with the fake GPU toolchain first on PATH, run directly (no run-as-candidate: not root here). */
function judge(ws: string, opts: { env?: Record<string, string>; args?: string[] } = {}): JudgeRun {
  n += 1;
  const out = join(dir, `out${n}`);
  mkdirSync(out);
  const log = join(dir, `nvcc${n}.log`);
  const r = spawnSync(
    'python3',
    ['-I', join(RUNNER, 'judge.py'), '--workspace', ws, '--out', out, '--build-dir', join(dir, `build${n}`), '--as-candidate', 'none', ...(opts.args ?? [])],
    { encoding: 'utf8', env: { PATH: `${FAKE_BIN}:/usr/bin:/bin`, FAKE_NVCC_LOG: log, FAKE_GPU_DIR: mkdtempSync(join(dir, 'gpu-')), ...opts.env }, timeout: 100_000 },
  );
  const read = (f: string) => (existsSync(join(out, f)) ? readFileSync(join(out, f), 'utf8') : null);
  const reward = read('reward.json');
  return {
    status: r.status,
    out: r.stdout + r.stderr,
    reward: reward === null ? null : (JSON.parse(reward) as Record<string, number>),
    infra: read('infrastructure-error.txt'),
    report: JSON.parse(read('gemm-report.json') ?? '{}') as Record<string, unknown>,
    nvcc: existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l) as { argv: string[]; cwd: string }) : [],
  };
}

const marked = (mark: string) => submission({ 'k.cu': `// FAKE-GPU: ${mark}\n${TILED}` });

describe('the Judge (judge.py) with a fake GPU', () => {
  it('measured: five fresh runner processes, the median TFLOP/s is the reward; built by the Judge with sm_90a on Hopper', () => {
    const state = join(dir, 'seq-state');
    const r = judge(submission({ 'tiled.cu': TILED, 'other.cu': 'printf("an earlier attempt, never compiled");' }, { 'NOTES.md': 'x' }, 'tiled'), {
      env: { FAKE_GPU_SEQUENCE: '30,10,50,20,40', FAKE_GPU_STATE: state },
    });
    expect(r.status).toBe(0);
    expect(r.reward).toEqual({ reward: 30, tflops_median: 30, tflops_min: 10, tflops_max: 50, candidate_fault: 0 });
    expect(r.infra).toBeNull();
    expect(r.out).toContain('median of 5 repeats: 30.00 TFLOP/s (min 10.00, max 50.00)');
    expect(r.report).toMatchObject({ kernel: 'tiled', target: 'sm_90a', gpu: { model: 'NVIDIA H200 (fake)', cc: '9.0' }, tflops_median: 30 });
    expect((r.report.repeats as unknown[]).length).toBe(5);
    // the Judge's command and flags, the runner's own files, one kernel: never a build file of the candidate's
    expect(r.nvcc).toHaveLength(1);
    expect(r.nvcc[0]?.argv).toEqual(['-O3', '-std=c++17', '-lineinfo', '--expt-relaxed-constexpr', '-arch=sm_90a', '-o', join(r.nvcc[0]?.cwd ?? '', 'gemm-runner'), 'assay_harness.cu', 'tiled.cu']);
    const built = readdirSync(r.nvcc[0]?.cwd ?? '').sort();
    expect(built).toEqual(['assay_harness.cu', 'gemm-runner', 'gemm.h', 'tiled.cu']); // other.cu: an earlier attempt, not copied
    expect(readFileSync(join(r.nvcc[0]?.cwd ?? '', 'gemm.h'), 'utf8')).toBe(readFileSync(join(RUNNER, 'gemm.h'), 'utf8'));
  });

  it('runs in Work as instruction.md tells the agent: one repeat, an --out directory made for it', () => {
    const out = join(dir, 'agent-out', 'judge');
    const r = spawnSync(
      'python3',
      ['-I', join(RUNNER, 'judge.py'), '--workspace', join(TASK, 'environment/workspace'), '--out', out, '--build-dir', join(dir, 'agent-build'), '--as-candidate', 'none', '--repeats', '1'],
      { encoding: 'utf8', env: { PATH: `${FAKE_BIN}:/usr/bin:/bin`, FAKE_GPU_DIR: mkdtempSync(join(dir, 'gpu-')) } },
    );
    expect(r.status).toBe(0);
    expect(JSON.parse(readFileSync(join(out, 'reward.json'), 'utf8'))).toMatchObject({ reward: 10, candidate_fault: 0 });
    expect(readFileSync(join(TASK, 'instruction.md'), 'utf8')).toContain('python3 /opt/assay-gemm/judge.py --workspace /workspace --out /tmp/judge --as-candidate none --repeats 1');
  });

  it('a GPU other than Hopper gets the portable fallback target (compute_80 PTX)', () => {
    const r = judge(marked('tflops=12.5'), { env: { FAKE_GPU_CC: '8.9' } });
    expect(r.reward).toMatchObject({ reward: 12.5 });
    expect(r.report).toMatchObject({ target: 'fallback' });
    expect(r.nvcc[0]?.argv).toEqual(expect.arrayContaining(['-gencode', 'arch=compute_80,code=compute_80']));
    expect(r.nvcc[0]?.argv).not.toContain('-arch=sm_90a');
  });

  const faults: Array<[string, () => string, string, RegExp, string[]]> = [
    ['a policy breach (nothing is compiled)', () => submission({ 'k.cu': kernel('', 'printf("x");') }), 'policy', /k.cu:\d+: printing/, []],
    ['a kernel that does not compile', () => marked('compile-error'), 'build_failed', /does not compile \(nvcc status 1\)/, []],
    ['a wrong result (FP16 accumulation)', () => marked('wrong'), 'wrong_result', /mean relative error 3.200e-02 over the bound 1e-03/, []],
    ['unwritten output elements', () => marked('unwritten'), 'wrong_result', /4096 output elements left unwritten/, []],
    ['a wrong timed call', () => marked('sample-wrong'), 'wrong_result', /a timed call's output was wrong/, []],
    ['a kernel error', () => marked('kernel-error'), 'kernel_error', /repeat 1: .*illegal memory access/, []],
    ['a crash', () => marked('segv'), 'crash', /repeat 1: the runner died of signal 11/, []],
    ['a hang', () => marked('hang'), 'timeout', /repeat 1 ran past 2 s/, ['--repeat-timeout', '2']],
    ['a forged result line', () => marked('forge'), 'forged_result', /a result line the runner did not write/, []],
    ['no result line', () => marked('no-result'), 'no_result', /the runner wrote no result line/, []],
    [
      'a sticky CUDA error the kernel left (the runner exits 4, its self-test does not)',
      () => marked('sticky-error'),
      'kernel_error',
      /repeat 1: gemm-runner: allocating A: an illegal memory access .*; the runner's self-test kernel ran fine \(status 0\), so this kernel caused it/,
      [],
    ],
  ];
  it.each(faults)('candidate fault, %s: reward 0 with the reason', (_what, make, kind, why, args) => {
    const r = judge(make(), { args });
    expect(r.status).toBe(0);
    expect(r.reward).toEqual({ reward: 0, tflops_median: 0, candidate_fault: 1 });
    expect(r.infra).toBeNull();
    expect(r.out).toMatch(new RegExp(`candidate fault \\(${kind}\\): `));
    expect(r.out).toMatch(why);
    expect(r.report).toMatchObject({ candidate_fault: { kind } });
    if (kind === 'policy') expect(r.nvcc).toEqual([]);
  });

  const infra: Array<[string, () => string, Record<string, string>, string[], RegExp]> = [
    ['no GPU (nvidia-smi fails)', () => marked('tflops=10'), { FAKE_GPU_NONE: '1' }, [], /^no GPU: nvidia-smi exited with status 9 \(NVIDIA-SMI has failed/],
    ['a driver error in the runner', () => marked('no-gpu'), {}, [], /^repeat 1: gemm-runner: no usable GPU: CUDA driver version is insufficient .*; the runner's self-test failed too$/m],
    ['no nvcc in the image', () => marked('tflops=10'), {}, ['--nvcc', '/nonexistent/nvcc'], /^nvcc not found/],
  ];
  it.each(infra)('infrastructure fault, %s: no reward, the reason in infrastructure-error.txt, exit 4', (_what, make, env, args, why) => {
    const r = judge(make(), { env, args });
    expect(r.status).toBe(4);
    expect(r.reward).toBeNull();
    expect(r.infra).toMatch(why);
    expect(r.out).toContain('infrastructure fault (no reward; the round is refunded)');
  });
});

describe('cuda/build.sh without the CUDA toolkit', () => {
  it('says that it skipped the compile and succeeds (machines without nvcc do not fail)', () => {
    const r = spawnSync('bash', [join(REPO, 'cuda/build.sh')], { encoding: 'utf8', env: { PATH: '/usr/bin:/bin', CUDA_HOME: join(dir, 'no-cuda') } });
    expect(r.status).toBe(0);
    expect(r.stdout).toBe(`cuda/build.sh: skipped the CUDA compile: nvcc not found on PATH or in ${join(dir, 'no-cuda')}/bin (install the CUDA toolkit to compile cuda/)\n`);
  });
});

const nvcc = ['/usr/local/cuda/bin/nvcc', ...(process.env.PATH ?? '').split(':').map((p) => join(p, 'nvcc'))].find((p) => existsSync(p));
const describeNvcc = nvcc || process.env.ASSAY_REQUIRE_NVCC === '1' ? describe : describe.skip;
describeNvcc('the runner compiles for Hopper (nvcc on this machine)', () => {
  it('harness.cu with the starting kernel, -arch=sm_90a, warnings as errors', () => {
    if (!nvcc) throw new Error('ASSAY_REQUIRE_NVCC=1 but nvcc was not found (CUDA toolkit at /usr/local/cuda)');
    const b = join(dir, 'nvcc-build');
    mkdirSync(b);
    const r = spawnSync(
      nvcc,
      ['-O3', '-std=c++17', '-arch=sm_90a', '-Werror', 'all-warnings', '-Xcompiler', '-Wall,-Wextra,-Werror', '-I', RUNNER, '-o', join(b, 'gemm-runner'), join(RUNNER, 'harness.cu'), START],
      { encoding: 'utf8', timeout: 110_000 },
    );
    expect(r.stdout + r.stderr).toBe('');
    expect(r.status).toBe(0);
    // without a GPU the runner is an infrastructure fault (status 4), never a measurement
    const run = spawnSync(join(b, 'gemm-runner'), ['--seed', '1f'], { input: '0123456789abcdef\n', encoding: 'utf8' });
    expect(run.status).toBe(4);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(/^gemm-runner: no usable GPU: /);
  });
});
