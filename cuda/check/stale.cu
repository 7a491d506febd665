// A hostile kernel for cuda/check-on-gpu.sh: a correct GEMM on its first call only (the Judge's correctness call),
// then nothing, in the hope that later calls are timed but not checked. The runner regenerates the inputs and poisons
// C before every timed call and samples each call's output, so the unwritten elements fail the gate and the Judge
// scores it 0 ("wrong_result"). It passes the source policy: the cheat is in what it does, not what it calls.
#include "gemm.h"

namespace {

__global__ void naive_gemm(const __half* A, const __half* B, __half* C, int M, int N, int K) {
  const int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= M || c >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += __half2float(A[(size_t)r * K + k]) * __half2float(B[(size_t)k * N + c]);
  C[(size_t)r * N + c] = __float2half(acc);
}

int calls = 0;

}  // namespace

void assay_gemm_fp16(const __half* A, const __half* B, __half* C, int M, int N, int K, void* workspace,
                     cudaStream_t stream) {
  (void)workspace;
  if (calls++ > 0) return;
  const dim3 block(16, 16), grid((N + 15) / 16, (M + 15) / 16);
  naive_gemm<<<grid, block, 0, stream>>>(A, B, C, M, N, K);
}
