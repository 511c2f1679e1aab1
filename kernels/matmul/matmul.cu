#include "matmul.h"

namespace {

constexpr int NAIVE_BLOCK = 16;
constexpr int TILE = 32;

// One thread per output element; every product reads A and B straight from global memory.
__global__ void matmul_naive(const float* __restrict__ A, const float* __restrict__ B,
                             float* __restrict__ C, int M, int N, int K) {
  const int row = blockIdx.y * NAIVE_BLOCK + threadIdx.y;
  const int col = blockIdx.x * NAIVE_BLOCK + threadIdx.x;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];
  C[(size_t)row * N + col] = acc;
}

// Shared-memory tiling: a block stages a TILE×TILE tile of A and of B, then every thread reads
// each staged value TILE times from shared memory instead of global memory.
__global__ void matmul_tiled(const float* __restrict__ A, const float* __restrict__ B,
                             float* __restrict__ C, int M, int N, int K) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE + 1];  // +1 keeps column reads of B free of bank conflicts
  const int ty = threadIdx.y, tx = threadIdx.x;
  const int row = blockIdx.y * TILE + ty;
  const int col = blockIdx.x * TILE + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.0f;
    Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  if (row < M && col < N) C[(size_t)row * N + col] = acc;
}

// Register tiling: a 256-thread block computes a 128×128 tile of C, each thread 8×8 outputs held
// in registers, so every value read from shared memory feeds 8 FMAs. K advances 8 at a time;
// the next A and B tiles are fetched into registers (float4) while the current ones are used,
// then stored into the other half of a double buffer. A is stored transposed (As[k][m]) so
// that both operands are read as float4. A thread's rows are {4ty..4ty+3, 64+4ty..} and its
// columns {4tx..4tx+3, 64+4tx..}: a quarter warp then reads 128 contiguous bytes of B.
constexpr int RT_BM = 128, RT_BN = 128, RT_BK = 8;

__device__ __forceinline__ float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }

__global__ void __launch_bounds__(256) matmul_regtile(const float* __restrict__ A, const float* __restrict__ B,
                                                      float* __restrict__ C, int M, int N, int K) {
  __shared__ __align__(16) float As[2][RT_BK][RT_BM];
  __shared__ __align__(16) float Bs[2][RT_BK][RT_BN];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int row0 = blockIdx.y * RT_BM, col0 = blockIdx.x * RT_BN;
  const int a_row = tid / 2, a_k = (tid % 2) * 4;     // one float4 of the 128×8 A tile
  const int b_k = tid / 32, b_col = (tid % 32) * 4;   // one float4 of the 8×128 B tile
  const float* a_src = A + (size_t)(row0 + a_row) * K + a_k;
  const float* b_src = B + (size_t)b_k * N + col0 + b_col;

  float4 a_next = load4(a_src), b_next = load4(b_src);
  auto stage = [&](int buf) {
    As[buf][a_k + 0][a_row] = a_next.x;
    As[buf][a_k + 1][a_row] = a_next.y;
    As[buf][a_k + 2][a_row] = a_next.z;
    As[buf][a_k + 3][a_row] = a_next.w;
    *reinterpret_cast<float4*>(&Bs[buf][b_k][b_col]) = b_next;
  };
  stage(0);
  __syncthreads();

  float acc[8][8] = {};
  int buf = 0;
  for (int k0 = 0; k0 < K; k0 += RT_BK) {
    const bool more = k0 + RT_BK < K;
    if (more) {
      a_next = load4(a_src + k0 + RT_BK);
      b_next = load4(b_src + (size_t)(k0 + RT_BK) * N);
    }
#pragma unroll
    for (int kk = 0; kk < RT_BK; ++kk) {
      const float4 a0 = load4(&As[buf][kk][4 * ty]), a1 = load4(&As[buf][kk][64 + 4 * ty]);
      const float4 b0 = load4(&Bs[buf][kk][4 * tx]), b1 = load4(&Bs[buf][kk][64 + 4 * tx]);
      const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int i = 0; i < 8; ++i) {
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] += a[i] * b[j];
      }
    }
    if (more) {  // everyone finished reading buf^1 at the previous barrier
      stage(buf ^ 1);
      __syncthreads();
      buf ^= 1;
    }
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int row = row0 + (i < 4 ? 4 * ty + i : 64 + 4 * ty + i - 4);
    float* c = C + (size_t)row * N + col0;
    *reinterpret_cast<float4*>(c + 4 * tx) = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
    *reinterpret_cast<float4*>(c + 64 + 4 * tx) = make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]);
  }
}

}  // namespace

const char* matmul_unsupported(int variant, int M, int N, int K) {
  if (M > 65535 * NAIVE_BLOCK) return "M must be at most 1048560 (the grid's y dimension)";
  if (variant == MATMUL_REGTILE && (K <= 0 || M % RT_BM || N % RT_BN || K % RT_BK))
    return "matmul-regtile needs M and N multiples of 128 and K a multiple of 8";
  return nullptr;
}

cudaError_t matmul_launch(int variant, const float* A, const float* B, float* C, int M, int N, int K,
                          cudaStream_t stream) {
  if (M <= 0 || N <= 0) return cudaSuccess;
  switch (variant) {
    case MATMUL_NAIVE: {
      const dim3 block(NAIVE_BLOCK, NAIVE_BLOCK);
      const dim3 grid((N + NAIVE_BLOCK - 1) / NAIVE_BLOCK, (M + NAIVE_BLOCK - 1) / NAIVE_BLOCK);
      matmul_naive<<<grid, block, 0, stream>>>(A, B, C, M, N, K);
      break;
    }
    case MATMUL_TILED: {
      const dim3 block(TILE, TILE);
      const dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
      matmul_tiled<<<grid, block, 0, stream>>>(A, B, C, M, N, K);
      break;
    }
    case MATMUL_REGTILE: {
      if (matmul_unsupported(variant, M, N, K)) return cudaErrorInvalidValue;
      const dim3 grid(N / RT_BN, M / RT_BM);
      matmul_regtile<<<grid, 256, 0, stream>>>(A, B, C, M, N, K);
      break;
    }
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}
