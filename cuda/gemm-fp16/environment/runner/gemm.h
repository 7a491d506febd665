// The kernel interface of the Assay FP16 GEMM task. The Judge compiles the selected kernel file together with its own
// runner (harness.cu) and this header from /opt/assay-gemm; a `gemm.h` in the workspace is never used.
//
// C = A * B with A (M x K), B (K x N) and C (M x N) row-major FP16, accumulated in FP32 or wider
// (alpha = 1, beta = 0). `workspace` is ASSAY_GEMM_WORKSPACE_BYTES of device memory the kernel may use as it likes
// (split-K partials, for example); its content is undefined on entry. All work must be queued on `stream`: the
// Judge times the call with CUDA events on that stream and checks every element of C afterwards.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#define ASSAY_GEMM_WORKSPACE_BYTES (64u << 20)

extern "C" void assay_gemm_fp16(const __half* A, const __half* B, __half* C, int M, int N, int K, void* workspace,
                                cudaStream_t stream);
