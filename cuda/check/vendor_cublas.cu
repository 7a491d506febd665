// The vendor GEMM under the task's protocol: cuBLAS's cublasGemmEx (FP16 in and out, FP32 compute) behind the task's
// kernel interface, built with the same runner (harness.cu) so it is timed exactly like a candidate's kernel.
// cuBLAS is loaded at run time (dlopen), so this file compiles wherever nvcc does, cuBLAS headers or not; the few
// declarations below are cuBLAS's public ABI (cublas_api.h; CUDA_R_16F comes from CUDA's library_types.h), stable
// across cuBLAS 11.x-13.x.
// Only cuda/check-on-gpu.sh builds it (with ../gemm-fp16/tests/harness.cu); it is never part of a candidate's build.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

#include "gemm.h"

namespace {

using cublasHandle_t = void*;
using cublasStatus_t = int;
constexpr int CUBLAS_OP_N = 0;
constexpr int CUBLAS_COMPUTE_32F = 68;
constexpr int CUBLAS_GEMM_DEFAULT = -1;

using create_fn = cublasStatus_t (*)(cublasHandle_t*);
using set_stream_fn = cublasStatus_t (*)(cublasHandle_t, cudaStream_t);
using gemm_ex_fn = cublasStatus_t (*)(cublasHandle_t, int, int, int, int, int, const void*, const void*, int, int,
                                      const void*, int, int, const void*, void*, int, int, int, int);

struct Cublas {
  cublasHandle_t handle = nullptr;
  set_stream_fn set_stream = nullptr;
  gemm_ex_fn gemm_ex = nullptr;
};

[[noreturn]] void fail(const char* what) {
  fprintf(stderr, "vendor GEMM: %s\n", what);
  std::exit(4);  // the runner's infrastructure-fault status: the vendor figure is the runner's own
}

Cublas& cublas() {
  static Cublas c = [] {
    Cublas x;
    void* lib = nullptr;
    for (const char* name : {"libcublas.so", "libcublas.so.13", "libcublas.so.12", "libcublas.so.11"})
      if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    if (lib == nullptr) fail("cannot load libcublas.so (install cuBLAS or set LD_LIBRARY_PATH)");
    const auto create = reinterpret_cast<create_fn>(dlsym(lib, "cublasCreate_v2"));
    x.set_stream = reinterpret_cast<set_stream_fn>(dlsym(lib, "cublasSetStream_v2"));
    x.gemm_ex = reinterpret_cast<gemm_ex_fn>(dlsym(lib, "cublasGemmEx"));
    if (create == nullptr || x.set_stream == nullptr || x.gemm_ex == nullptr) fail("libcublas lacks cublasGemmEx");
    if (create(&x.handle) != 0) fail("cublasCreate failed");
    return x;
  }();
  return c;
}

}  // namespace

// Row-major C = A B is column-major C^T = B^T A^T: cuBLAS gets B as the left operand.
void assay_gemm_fp16(const __half* A, const __half* B, __half* C, int M, int N, int K, void* workspace,
                     cudaStream_t stream) {
  (void)workspace;
  Cublas& c = cublas();
  const float one = 1.0f, zero = 0.0f;
  if (c.set_stream(c.handle, stream) != 0) fail("cublasSetStream failed");
  if (c.gemm_ex(c.handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, B, CUDA_R_16F, N, A, CUDA_R_16F, K, &zero, C,
                CUDA_R_16F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != 0)
    fail("cublasGemmEx failed");
}
