// The Judge's runner of the FP16 GEMM task: one timed repeat in one fresh process (judge.py starts five).
//
//   gemm-runner --seed HEX [--m 4096 --n 4096 --k 4096] [--warmup 3] [--calls 10] [--samples 512]
//   stdin: one line, the repeat's nonce (hex). It stays in the pipe, outside this process's memory, while kernel code
//   runs: the runner reads it only after the last call, writes the result line and leaves with _exit (no static
//   destructor of the kernel's runs after it). Never in the environment or the arguments.
//
// Protocol of one repeat (docs in ../README.md, "Timing protocol"):
//   1. fresh random A and B from --seed (uniform in [-1, 1), rounded to FP16), the reference C in FP32 by the
//      runner's own kernel;
//   2. correctness call: C poisoned (every byte 0xFF, an FP16 NaN), one call, every element compared: unwritten
//      (non-finite) elements, mean and max relative error against the reference;
//   3. --warmup untimed calls, then --calls timed calls; before each timed call the inputs are regenerated in place
//      from a new seed, C is poisoned and the L2 cache is flushed (a memset over twice its size), all outside the
//      CUDA events around the call; after each call, --samples random elements are checked against a reference
//      computed for them alone;
//   4. one result line on the real stdout: `ASSAY-GEMM-RESULT <nonce> <json>`.
//
// While kernel code runs, file descriptors 1 and 2 point at /dev/null: nothing the kernel prints can reach the
// Judge. Exit status: 0 the repeat was measured (the JSON says whether the result was correct), 3 a candidate fault
// (the kernel raised a CUDA error), 4 an infrastructure fault (no GPU, driver error, the runner's own allocation
// failed), 2 bad arguments.
#include <cuda_runtime.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gemm.h"

namespace {

constexpr int EXIT_MEASURED = 0;
constexpr int EXIT_USAGE = 2;
constexpr int EXIT_CANDIDATE = 3;
constexpr int EXIT_INFRA = 4;

int g_in = -1;   // the real stdin (the nonce's pipe), kept aside while kernel code runs
int g_out = -1;  // the real stdout
int g_err = -1;  // the real stderr

void say(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void say(const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  const int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n > 0 && g_err >= 0) {
    ssize_t w = write(g_err, buf, std::min<size_t>(n, sizeof buf - 1));
    (void)w;
  }
}

[[noreturn]] void die(int code, const char* what, cudaError_t e) {
  say("gemm-runner: %s: %s (%s)\n", what, cudaGetErrorString(e), cudaGetErrorName(e));
  _exit(code);
}

// Runner-side CUDA call: any error is the infrastructure's (before any kernel code ran) or the candidate's (after).
bool g_candidate_ran = false;
void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  die(g_candidate_ran ? EXIT_CANDIDATE : EXIT_INFRA, what, e);
}

// ---- inputs and references ------------------------------------------------------------------------------------

__device__ __forceinline__ uint32_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

__global__ void fill_uniform(__half* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const float u = (mix(seed * 0x9e3779b97f4a7c15ULL + i) >> 8) * (1.0f / 16777216.0f);  // [0, 1)
    p[i] = __float2half_rn(2.0f * u - 1.0f);
  }
}

// Reference C in FP32: a plain shared-memory tiled kernel, independent of the candidate.
constexpr int RT = 32;
__global__ void reference_gemm(const __half* A, const __half* B, float* R, int M, int N, int K) {
  __shared__ float As[RT][RT + 1];
  __shared__ float Bs[RT][RT + 1];
  const int r = blockIdx.y * RT + threadIdx.y, c = blockIdx.x * RT + threadIdx.x;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += RT) {
    As[threadIdx.y][threadIdx.x] = (r < M && k0 + threadIdx.x < K) ? __half2float(A[(size_t)r * K + k0 + threadIdx.x]) : 0.0f;
    Bs[threadIdx.y][threadIdx.x] = (k0 + threadIdx.y < K && c < N) ? __half2float(B[(size_t)(k0 + threadIdx.y) * N + c]) : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < RT; ++k) acc = fmaf(As[threadIdx.y][k], Bs[k][threadIdx.x], acc);
    __syncthreads();
  }
  if (r < M && c < N) R[(size_t)r * N + c] = acc;
}

// Per block: [unwritten count, sum |c-r|/(|r|+s), max |c-r|/(|r|+s), sum r^2] over its slice.
constexpr int CMP_THREADS = 256;
__global__ void compare_full(const __half* C, const float* R, size_t n, float scale, double* partial) {
  __shared__ double s_cnt[CMP_THREADS], s_sum[CMP_THREADS], s_max[CMP_THREADS];
  double cnt = 0, sum = 0, mx = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const float c = __half2float(C[i]);
    const float r = R[i];
    if (!isfinite(c)) {
      cnt += 1;
      continue;
    }
    const double e = fabs((double)c - (double)r) / (fabs((double)r) + scale);
    sum += e;
    mx = fmax(mx, e);
  }
  s_cnt[threadIdx.x] = cnt;
  s_sum[threadIdx.x] = sum;
  s_max[threadIdx.x] = mx;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      s_cnt[threadIdx.x] += s_cnt[threadIdx.x + s];
      s_sum[threadIdx.x] += s_sum[threadIdx.x + s];
      s_max[threadIdx.x] = fmax(s_max[threadIdx.x], s_max[threadIdx.x + s]);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    partial[blockIdx.x * 3 + 0] = s_cnt[0];
    partial[blockIdx.x * 3 + 1] = s_sum[0];
    partial[blockIdx.x * 3 + 2] = s_max[0];
  }
}

__global__ void sum_squares(const float* R, size_t n, double* out) {
  __shared__ double s[CMP_THREADS];
  double acc = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    acc += (double)R[i] * R[i];
  s[threadIdx.x] = acc;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}

// Sampled check after a timed call: one warp per sample computes the reference dot product; stat[i] is the relative
// error of sample i, or +inf when the element is unwritten.
__global__ void check_samples(const __half* A, const __half* B, const __half* C, int M, int N, int K, uint64_t seed,
                              int samples, float scale, float* stat) {
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  if (warp >= samples) return;
  const uint32_t h = mix(seed ^ (0x5bd1e995ULL * (warp + 1)));
  const int r = h % M, c = mix(h + 0x1234567ULL) % N;
  float acc = 0.0f;
  for (int k = lane; k < K; k += 32) acc = fmaf(__half2float(A[(size_t)r * K + k]), __half2float(B[(size_t)k * N + c]), acc);
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
  if (lane == 0) {
    const float got = __half2float(C[(size_t)r * N + c]);
    stat[warp] = isfinite(got) ? fabsf(got - acc) / (fabsf(acc) + scale) : INFINITY;
  }
}

// ---- arguments ------------------------------------------------------------------------------------------------

struct Args {
  int m = 4096, n = 4096, k = 4096, warmup = 3, calls = 10, samples = 512;
  uint64_t seed = 0;
  bool has_seed = false;
};

bool parse_int(const char* s, int lo, int hi, int* out) {
  char* end = nullptr;
  const long v = strtol(s, &end, 10);
  if (!*s || *end || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

bool parse_args(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 >= argc) return false;
    const std::string f = argv[i];
    const char* v = argv[i + 1];
    bool ok = true;
    if (f == "--m") ok = parse_int(v, 16, 16384, &a->m);
    else if (f == "--n") ok = parse_int(v, 16, 16384, &a->n);
    else if (f == "--k") ok = parse_int(v, 16, 16384, &a->k);
    else if (f == "--warmup") ok = parse_int(v, 0, 100, &a->warmup);
    else if (f == "--calls") ok = parse_int(v, 1, 1000, &a->calls);
    else if (f == "--samples") ok = parse_int(v, 1, 65536, &a->samples);
    else if (f == "--seed") {
      char* end = nullptr;
      a->seed = strtoull(v, &end, 16);
      ok = *v && !*end && strlen(v) <= 16;
      a->has_seed = ok;
    } else ok = false;
    if (!ok) {
      say("gemm-runner: bad argument %s %s\n", f.c_str(), v);
      return false;
    }
  }
  return a->has_seed;
}

bool read_nonce(int fd, std::string* nonce) {
  char buf[80];
  ssize_t got = 0;
  while (got < (ssize_t)sizeof buf) {
    const ssize_t r = read(fd, buf + got, sizeof buf - got);
    if (r <= 0) break;
    got += r;
    if (memchr(buf, '\n', got)) break;
  }
  nonce->clear();
  for (ssize_t i = 0; i < got && buf[i] != '\n'; ++i) {
    const char ch = buf[i];
    if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return false;
    nonce->push_back(ch);
  }
  return nonce->size() >= 16 && nonce->size() <= 64;
}

// Kernel code runs with fds 1 and 2 on /dev/null and stdin closed.
void silence_kernel_output() {
  g_in = dup(0);
  g_out = dup(1);
  g_err = dup(2);
  const int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (g_in < 0 || g_out < 0 || g_err < 0 || null_fd < 0) {
    fprintf(stderr, "gemm-runner: cannot set up its file descriptors\n");
    _exit(EXIT_INFRA);
  }
  fcntl(g_in, F_SETFD, FD_CLOEXEC);
  fcntl(g_out, F_SETFD, FD_CLOEXEC);
  fcntl(g_err, F_SETFD, FD_CLOEXEC);
  dup2(null_fd, 0);
  dup2(null_fd, 1);
  dup2(null_fd, 2);
  close(null_fd);
}

void emit(const std::string& line) {
  size_t off = 0;
  while (off < line.size()) {
    const ssize_t w = write(g_out, line.data() + off, line.size() - off);
    if (w <= 0) _exit(EXIT_INFRA);
    off += static_cast<size_t>(w);
  }
}

std::string json_str(const char* s) {
  std::string o = "\"";
  for (const char* p = s; *p; ++p) {
    const unsigned char ch = static_cast<unsigned char>(*p);
    if (ch == '"' || ch == '\\') o += '\\', o += static_cast<char>(ch);
    else if (ch < 0x20 || ch >= 0x7f) o += '?';
    else o += static_cast<char>(ch);
  }
  return o + "\"";
}

template <typename T>
T* device_alloc(size_t bytes, const char* what) {
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), what);  // the runner's own allocation: an infrastructure fault when it fails
  return static_cast<T*>(p);
}

}  // namespace

int main(int argc, char** argv) {
  g_err = 2;
  Args a;
  if (!parse_args(argc, argv, &a)) {
    say("usage: gemm-runner --seed HEX [--m N --n N --k N --warmup N --calls N --samples N] < nonce\n");
    return EXIT_USAGE;
  }
  silence_kernel_output();

  int devices = 0;
  check(cudaGetDeviceCount(&devices), "no usable GPU");
  if (devices < 1) {
    say("gemm-runner: no GPU is visible\n");
    return EXIT_INFRA;
  }
  check(cudaSetDevice(0), "cudaSetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  int sm_khz = 0, mem_khz = 0, driver = 0, runtime = 0;
  cudaDeviceGetAttribute(&sm_khz, cudaDevAttrClockRate, 0);
  cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, 0);
  check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");

  const size_t M = a.m, N = a.n, K = a.k;
  const size_t l2 = prop.l2CacheSize > 0 ? static_cast<size_t>(prop.l2CacheSize) : (50u << 20);
  const size_t flush_bytes = std::max<size_t>(2 * l2, 128u << 20);
  __half* A = device_alloc<__half>(M * K * sizeof(__half), "allocating A");
  __half* B = device_alloc<__half>(K * N * sizeof(__half), "allocating B");
  __half* C = device_alloc<__half>(M * N * sizeof(__half), "allocating C");
  float* R = device_alloc<float>(M * N * sizeof(float), "allocating the reference");
  void* workspace = device_alloc<void>(ASSAY_GEMM_WORKSPACE_BYTES, "allocating the workspace");
  void* flush = device_alloc<void>(flush_bytes, "allocating the L2 flush buffer");
  const int cmp_blocks = 1024;
  double* partial = device_alloc<double>(cmp_blocks * 3 * sizeof(double), "allocating comparison buffers");
  float* sample_stat = device_alloc<float>(static_cast<size_t>(a.samples) * sizeof(float), "allocating sample buffers");

  // A blocking stream: work the kernel puts on the legacy default stream is ordered with it, so it is timed too.
  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "cudaStreamCreate");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");

  const auto gen = [&](uint64_t seed) {
    fill_uniform<<<1024, 256, 0, stream>>>(A, M * K, seed * 2 + 1);
    fill_uniform<<<1024, 256, 0, stream>>>(B, K * N, seed * 2 + 2);
    check(cudaGetLastError(), "generating inputs");
  };
  gen(a.seed);
  reference_gemm<<<dim3((N + RT - 1) / RT, (M + RT - 1) / RT), dim3(RT, RT), 0, stream>>>(A, B, R, a.m, a.n, a.k);
  check(cudaGetLastError(), "reference GEMM");
  sum_squares<<<cmp_blocks, CMP_THREADS, 0, stream>>>(R, M * N, partial);
  std::vector<double> host(cmp_blocks * 3);
  check(cudaMemcpyAsync(host.data(), partial, cmp_blocks * sizeof(double), cudaMemcpyDeviceToHost, stream), "reading the reference scale");
  check(cudaStreamSynchronize(stream), "reference GEMM");
  double ss = 0;
  for (int i = 0; i < cmp_blocks; ++i) ss += host[i];
  // Errors are relative to |reference| + its RMS: elements near zero are not held to a relative bound they cannot meet.
  const float scale = static_cast<float>(std::sqrt(ss / static_cast<double>(M * N)));

  // 2. correctness call
  check(cudaMemsetAsync(C, 0xFF, M * N * sizeof(__half), stream), "poisoning C");
  g_candidate_ran = true;
  assay_gemm_fp16(A, B, C, a.m, a.n, a.k, workspace, stream);
  check(cudaGetLastError(), "the kernel's launch");
  check(cudaStreamSynchronize(stream), "the kernel");
  check(cudaDeviceSynchronize(), "the kernel");
  compare_full<<<cmp_blocks, CMP_THREADS, 0, stream>>>(C, R, M * N, scale, partial);
  check(cudaMemcpyAsync(host.data(), partial, cmp_blocks * 3 * sizeof(double), cudaMemcpyDeviceToHost, stream), "comparing");
  check(cudaStreamSynchronize(stream), "comparing");
  double unwritten = 0, err_sum = 0, err_max = 0;
  for (int i = 0; i < cmp_blocks; ++i) {
    unwritten += host[i * 3];
    err_sum += host[i * 3 + 1];
    err_max = std::max(err_max, host[i * 3 + 2]);
  }
  const double written = static_cast<double>(M * N) - unwritten;
  const double err_mean = written > 0 ? err_sum / written : INFINITY;

  // 3. warm-up, then timed calls
  for (int i = 0; i < a.warmup; ++i) assay_gemm_fp16(A, B, C, a.m, a.n, a.k, workspace, stream);
  check(cudaGetLastError(), "the kernel's launch (warm-up)");
  check(cudaStreamSynchronize(stream), "the kernel (warm-up)");
  std::vector<float> ms(a.calls);
  std::vector<float> stats(a.samples);
  double sample_max = 0;
  long sample_unwritten = 0;
  for (int i = 0; i < a.calls; ++i) {
    const uint64_t call_seed = a.seed ^ (0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(i + 1));
    gen(call_seed);
    check(cudaMemsetAsync(C, 0xFF, M * N * sizeof(__half), stream), "poisoning C");
    check(cudaMemsetAsync(flush, i & 0xFF, flush_bytes, stream), "flushing L2");
    check(cudaEventRecord(start, stream), "cudaEventRecord");
    assay_gemm_fp16(A, B, C, a.m, a.n, a.k, workspace, stream);
    check(cudaEventRecord(stop, stream), "cudaEventRecord");
    check(cudaGetLastError(), "the kernel's launch (timed)");
    check_samples<<<(a.samples * 32 + 255) / 256, 256, 0, stream>>>(A, B, C, a.m, a.n, a.k, call_seed, a.samples, scale, sample_stat);
    check(cudaMemcpyAsync(stats.data(), sample_stat, a.samples * sizeof(float), cudaMemcpyDeviceToHost, stream), "sampling");
    check(cudaStreamSynchronize(stream), "the kernel (timed)");
    check(cudaEventElapsedTime(&ms[i], start, stop), "cudaEventElapsedTime");
    for (const float s : stats) {
      if (!std::isfinite(s)) ++sample_unwritten;
      else sample_max = std::max<double>(sample_max, s);
    }
  }

  double mean_ms = 0;
  for (const float t : ms) mean_ms += t;
  mean_ms /= a.calls;
  const double tflops = 2.0 * M * N * K / (mean_ms * 1e-3) / 1e12;

  std::string j = "{";
  j += "\"gpu\":" + json_str(prop.name);
  char buf[512];
  snprintf(buf, sizeof buf,
           ",\"cc\":\"%d.%d\",\"sm_clock_mhz\":%d,\"mem_clock_mhz\":%d,\"driver\":%d,\"runtime\":%d,\"l2_bytes\":%zu"
           ",\"m\":%d,\"n\":%d,\"k\":%d,\"warmup\":%d,\"calls\":%d,\"samples\":%d",
           prop.major, prop.minor, sm_khz / 1000, mem_khz / 1000, driver, runtime, l2, a.m, a.n, a.k, a.warmup, a.calls,
           a.samples);
  j += buf;
  snprintf(buf, sizeof buf,
           ",\"unwritten\":%.0f,\"mean_rel_err\":%.6e,\"max_rel_err\":%.6e,\"sample_unwritten\":%ld,\"sample_max_rel_err\":%.6e"
           ",\"mean_ms\":%.6f,\"tflops\":%.4f,\"call_ms\":[",
           unwritten, err_mean, err_max, sample_unwritten, sample_max, mean_ms, tflops);
  j += buf;
  for (int i = 0; i < a.calls; ++i) {
    snprintf(buf, sizeof buf, "%s%.6f", i ? "," : "", ms[i]);
    j += buf;
  }
  j += "]}";
  std::string nonce;
  if (!read_nonce(g_in, &nonce)) {
    say("gemm-runner: stdin must hold a nonce of 16-64 lowercase hex digits\n");
    _exit(EXIT_USAGE);
  }
  emit("ASSAY-GEMM-RESULT " + nonce + " " + j + "\n");
  _exit(EXIT_MEASURED);
}
