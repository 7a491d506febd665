// A deliberately wrong kernel for cuda/check-on-gpu.sh: a naive GEMM that accumulates in FP16, the classic mistake.
// Its sums over K = 4096 lose precision (mean relative error 3.6e-3 on an H100), so the Judge's mean error gate
// (1e-3) fails it and it scores 0 ("wrong_result"). It passes the source policy: the failure is the numbers, not the source.
#include "gemm.h"

namespace {

__global__ void half_accumulating_gemm(const __half* A, const __half* B, __half* C, int M, int N, int K) {
  const int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= M || c >= N) return;
  __half acc = __float2half(0.0f);
  for (int k = 0; k < K; ++k) acc = __hfma(A[(size_t)r * K + k], B[(size_t)k * N + c], acc);
  C[(size_t)r * N + c] = acc;
}

}  // namespace

void assay_gemm_fp16(const __half* A, const __half* B, __half* C, int M, int N, int K, void* workspace,
                     cudaStream_t stream) {
  (void)workspace;
  const dim3 block(16, 16), grid((N + 15) / 16, (M + 15) / 16);
  half_accumulating_gemm<<<grid, block, 0, stream>>>(A, B, C, M, N, K);
}
