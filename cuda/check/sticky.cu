// A hostile kernel for cuda/check-on-gpu.sh: a static initializer launches a kernel that faults before the runner's
// main() starts, leaving a sticky CUDA error that the runner's own first CUDA call then reports as an infrastructure
// fault (exit 4), hoping for a refunded round instead of a 0. The Judge runs its trusted self-test kernel in a fresh
// process; that one succeeds, so the fault is the candidate's: 0 ("kernel_error").
#include "gemm.h"

namespace {

__global__ void fault(int* p) { *p = 1; }

struct Poison {
  Poison() { fault<<<1, 1>>>(nullptr); }
};
Poison poison;

}  // namespace

void assay_gemm_fp16(const __half* A, const __half* B, __half* C, int M, int N, int K, void* workspace,
                     cudaStream_t stream) {
  (void)A, (void)B, (void)C, (void)M, (void)N, (void)K, (void)workspace, (void)stream;
}
