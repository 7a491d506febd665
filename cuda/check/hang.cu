// A hostile kernel for cuda/check-on-gpu.sh: it spins on a flag that nothing ever sets, so the call never returns.
// The Judge kills the repeat at its time limit and scores it 0 ("timeout"); the GPU is free again for the next
// process. It passes the source policy: nothing in the source says it will not finish.
#include "gemm.h"

namespace {

__device__ int never_set;

__global__ void spin_forever() {
  while (atomicAdd(&never_set, 0) == 0) {
  }
}

}  // namespace

void assay_gemm_fp16(const __half* A, const __half* B, __half* C, int M, int N, int K, void* workspace,
                     cudaStream_t stream) {
  (void)A, (void)B, (void)C, (void)M, (void)N, (void)K, (void)workspace;
  spin_forever<<<1, 1, 0, stream>>>();
}
