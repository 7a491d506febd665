// The task's reference solution (solve.sh copies it in): a tensor-core kernel through the WMMA API (mma.h), 128 x 128
// tiles of C per block of 8 warps, each warp a 32 x 64 sub-tile (2 x 4 fragments of 16 x 16), K staged in shared
// memory 32 at a time, FP32 accumulation. The oracle `assay task check` judges, a figure of cuda/check-on-gpu.sh (how
// far the straightforward tensor-core route gets) and an accepted source in the policy tests. Requires M and N multiples of 128 and K of 32 (the task's 4096 x 4096 x 4096).
#include <mma.h>

#include "gemm.h"

namespace {

using namespace nvcuda;

constexpr int BM = 128, BN = 128, BK = 32;
constexpr int WARPS = 8, THREADS = WARPS * 32;
constexpr int PAD = 8;  // halves of padding per shared-memory row against bank conflicts

__global__ void __launch_bounds__(THREADS) wmma_gemm(const __half* __restrict__ A, const __half* __restrict__ B,
                                                    __half* __restrict__ C, int M, int N, int K) {
  __shared__ __align__(128) __half As[BM][BK + PAD];
  __shared__ __align__(128) __half Bs[BK][BN + PAD];
  __shared__ __align__(128) float Cs[WARPS][16][16 + 4];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / 2;  // 0..3: rows wm*32 .. +32 of the block tile
  const int wn = warp % 2;  // 0..1: columns wn*64 .. +64
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

  for (int k0 = 0; k0 < K; k0 += BK) {
    // 128 x 32 halves of A and 32 x 128 of B, 8 halves (16 bytes) per load
    for (int i = threadIdx.x; i < BM * BK / 8; i += THREADS) {
      const int r = i / (BK / 8), c = (i % (BK / 8)) * 8;
      *reinterpret_cast<uint4*>(&As[r][c]) = *reinterpret_cast<const uint4*>(&A[(size_t)(row0 + r) * K + k0 + c]);
    }
    for (int i = threadIdx.x; i < BK * BN / 8; i += THREADS) {
      const int r = i / (BN / 8), c = (i % (BN / 8)) * 8;
      *reinterpret_cast<uint4*>(&Bs[r][c]) = *reinterpret_cast<const uint4*>(&B[(size_t)(k0 + r) * N + col0 + c]);
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b[4];
#pragma unroll
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(a[i], &As[wm * 32 + i * 16][kk], BK + PAD);
#pragma unroll
      for (int j = 0; j < 4; ++j) wmma::load_matrix_sync(b[j], &Bs[kk][wn * 64 + j * 16], BN + PAD);
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
  // FP32 fragments to FP16 C through a per-warp 16 x 16 staging tile
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      wmma::store_matrix_sync(&Cs[warp][0][0], acc[i][j], 16 + 4, wmma::mem_row_major);
      __syncwarp();
      const int r0 = row0 + wm * 32 + i * 16, c0 = col0 + wn * 64 + j * 16;
      for (int e = lane; e < 256; e += 32) {
        const int r = e / 16, c = e % 16;
        C[(size_t)(r0 + r) * N + c0 + c] = __float2half_rn(Cs[warp][r][c]);
      }
      __syncwarp();
    }
}

}  // namespace

void assay_gemm_fp16(const __half* A, const __half* B, __half* C, int M, int N, int K, void* workspace,
                     cudaStream_t stream) {
  (void)workspace;
  const dim3 grid(N / BN, M / BM);
  wmma_gemm<<<grid, THREADS, 0, stream>>>(A, B, C, M, N, K);
}
