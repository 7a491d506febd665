// The runner's self-test kernel: a plain, trusted GEMM (FP32 accumulation, one thread per element). judge.py builds
// the runner with it when a repeat ends in an infrastructure fault (exit 4): if the runner fails the same way with
// this kernel, the GPU or driver is at fault (no reward, refunded); if not, the candidate's kernel caused it (for
// example a kernel launched before main() that left a sticky CUDA error), and it scores 0.
#include "gemm.h"

namespace {

__global__ void selftest_gemm(const __half* A, const __half* B, __half* C, int M, int N, int K) {
  const int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= M || c >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc = fmaf(__half2float(A[(size_t)r * K + k]), __half2float(B[(size_t)k * N + c]), acc);
  C[(size_t)r * N + c] = __float2half_rn(acc);
}

}  // namespace

void assay_gemm_fp16(const __half* A, const __half* B, __half* C, int M, int N, int K, void* workspace,
                     cudaStream_t stream) {
  (void)workspace;
  const dim3 block(16, 16), grid((N + 15) / 16, (M + 15) / 16);
  selftest_gemm<<<grid, block, 0, stream>>>(A, B, C, M, N, K);
}
