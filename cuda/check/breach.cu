// A policy-breaking kernel for cuda/check-on-gpu.sh: it hands the work to cuBLAS, loaded with dlopen so that it
// would build without cuBLAS headers. The Judge's source policy refuses it before anything is compiled (dlopen,
// dlsym, cublas*, extern declarations), so it scores 0 ("policy") however fast cuBLAS would have been.
#include <dlfcn.h>

#include "gemm.h"

using gemm_ex_fn = int (*)(void*, int, int, int, int, int, const void*, const void*, int, int, const void*, int, int,
                           const void*, void*, int, int, int, int);

void assay_gemm_fp16(const __half* A, const __half* B, __half* C, int M, int N, int K, void* workspace,
                     cudaStream_t stream) {
  (void)workspace;
  static void* handle = nullptr;
  void* lib = dlopen("libcublas.so", RTLD_NOW);
  if (lib == nullptr) return;
  auto create = reinterpret_cast<int (*)(void**)>(dlsym(lib, "cublasCreate_v2"));
  auto set_stream = reinterpret_cast<int (*)(void*, cudaStream_t)>(dlsym(lib, "cublasSetStream_v2"));
  auto gemm = reinterpret_cast<gemm_ex_fn>(dlsym(lib, "cublasGemmEx"));
  if (create == nullptr || set_stream == nullptr || gemm == nullptr) return;
  if (handle == nullptr) create(&handle);
  set_stream(handle, stream);
  const float one = 1.0f, zero = 0.0f;
  gemm(handle, 0, 0, N, M, K, &one, B, CUDA_R_16F, N, A, CUDA_R_16F, K, &zero, C, CUDA_R_16F, N, 68, -1);
}
