// A hostile kernel for cuda/check-on-gpu.sh: it computes nothing and writes far past the end of C, so the GPU raises
// an illegal-address error inside the candidate's call. The runner reports a CUDA error after kernel code ran (exit 3)
// and the Judge scores it 0 ("kernel_error"). It passes the source policy: the fault is at run time.
#include "gemm.h"

namespace {

__global__ void write_past_the_end(__half* C, size_t offset) { C[offset + threadIdx.x] = __float2half(1.0f); }

}  // namespace

void assay_gemm_fp16(const __half* A, const __half* B, __half* C, int M, int N, int K, void* workspace,
                     cudaStream_t stream) {
  (void)A, (void)B, (void)K, (void)workspace;
  write_past_the_end<<<1, 32, 0, stream>>>(C, (size_t)M * N + ((size_t)1 << 40));
}
