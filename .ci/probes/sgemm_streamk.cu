// matmul-regtile's tail (issue 29): at 4096^3 its 1024 tiles fill 264 slots (132 SMs x 2 blocks) 3.88
// times, so the last of four waves runs 12 % empty. A persistent grid that runs whole waves of tiles
// data-parallel and splits the k-loop of the last tiles evenly over every block (stream-K) removes that.
// Times the shipped kernel against the split one, alone, CUDA events, median of 30 (10 at 8192).
// Result (H100, 2026-11-27): 12-16 % slower than the shipped kernel; docs/benchmarks/h100-hopper.md,
// "stream-K". Not kept.
//   nvcc -arch=sm_90 -O3 -o /tmp/sk .ci/probes/sgemm_streamk.cu && /tmp/sk
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#include "../../kernels/matmul/matmul.cu"

namespace sk {

constexpr int BM = 128, BN = 128, BK = 8;

// acc += A[row0.., kb*8 .. ke*8) · B[.., col0..]: the shipped kernel's loop over one tile's k-slices
__device__ __forceinline__ void tile_loop(const float* __restrict__ A, const float* __restrict__ B, int N, int K,
                                          int row0, int col0, int kb, int ke, float (&acc)[8][8],
                                          float (*As)[BK][BM], float (*Bs)[BK][BN]) {
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int a_row = tid / 2, a_k = (tid % 2) * 4;
  const int b_k = tid / 32, b_col = (tid % 32) * 4;
  const float* a_src = A + (size_t)(row0 + a_row) * K + a_k;
  const float* b_src = B + (size_t)b_k * N + col0 + b_col;
  float4 a_next = load4(a_src + kb * BK), b_next = load4(b_src + (size_t)kb * BK * N);
  auto stage = [&](int buf) {
    As[buf][a_k + 0][a_row] = a_next.x;
    As[buf][a_k + 1][a_row] = a_next.y;
    As[buf][a_k + 2][a_row] = a_next.z;
    As[buf][a_k + 3][a_row] = a_next.w;
    *reinterpret_cast<float4*>(&Bs[buf][b_k][b_col]) = b_next;
  };
  __syncthreads();  // the previous tile's last reads of buffer 0 are done
  stage(0);
  __syncthreads();
  int buf = 0;
  for (int k = kb; k < ke; ++k) {
    const bool more = k + 1 < ke;
    if (more) {
      a_next = load4(a_src + (k + 1) * BK);
      b_next = load4(b_src + (size_t)(k + 1) * BK * N);
    }
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
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
    if (more) {
      stage(buf ^ 1);
      __syncthreads();
      buf ^= 1;
    }
  }
}

__device__ __forceinline__ void store_tile(float* __restrict__ C, int N, int row0, int col0, const float (&acc)[8][8]) {
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int row = row0 + (i < 4 ? 4 * ty + i : 64 + 4 * ty + i - 4);
    float* c = C + (size_t)row * N + col0;
    *reinterpret_cast<float4*>(c + 4 * tx) = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
    *reinterpret_cast<float4*>(c + 64 + 4 * tx) = make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]);
  }
}

// One block per slot, persistent. Tiles [0, dp_tiles) go whole to blocks in rounds; the k-slices of the
// tiles after them are split evenly over the blocks, each range at least one tile long, so a tile is cut
// at most once: its head by block c (at the end of c's range), its tail by block c+1 (at its start).
// Both halves go to slot c+1 of the workspace; whichever lands second adds the other's and stores the
// tile. a + b == b + a in floating point, so the result does not depend on which one that is.
template <bool STATE_IN_SHARED>
__global__ void __launch_bounds__(256, 2) regtile_sk(const float* __restrict__ A, const float* __restrict__ B,
                                                    float* __restrict__ C, int M, int N, int K, int dp_tiles,
                                                    float* __restrict__ ws, int* __restrict__ arrived) {
  __shared__ __align__(16) float As[2][BK][BM];
  __shared__ __align__(16) float Bs[2][BK][BN];
  __shared__ int second, s_it;
  const int G = gridDim.x, tiles_n = N / BN, tiles = (M / BM) * tiles_n, KI = K / BK;
  for (int t = blockIdx.x; t < dp_tiles; t += G) {
    float acc[8][8] = {};
    tile_loop(A, B, N, K, (t / tiles_n) * BM, (t % tiles_n) * BN, 0, KI, acc, As, Bs);
    store_tile(C, N, (t / tiles_n) * BM, (t % tiles_n) * BN, acc);
  }
  // the launcher keeps tiles * KI under 2^31
  const int first = dp_tiles * KI, span = (tiles - dp_tiles) * KI;
  int it = first + (int)((long long)span * blockIdx.x / G);
  const int end = first + (int)((long long)span * (blockIdx.x + 1) / G);
  if (STATE_IN_SHARED && threadIdx.x == 0) s_it = it;
  while (it < end) {
    const int t = it / KI, kb = it % KI, ke = min(KI, kb + (end - it));
    const int row0 = (t / tiles_n) * BM, col0 = (t % tiles_n) * BN;
    float acc[8][8] = {};
    tile_loop(A, B, N, K, row0, col0, kb, ke, acc, As, Bs);
    if (STATE_IN_SHARED) {  // the loop's state kept out of registers across the tile (it is read back after a barrier)
      if (threadIdx.x == 0) s_it += ke - kb;
      __syncthreads();
      it = s_it;
    } else {
      it += ke - kb;
    }
    if (kb == 0 && ke == KI) {
      store_tile(C, N, row0, col0, acc);
      continue;
    }
    const int slot = kb == 0 ? blockIdx.x + 1 : blockIdx.x, part = kb == 0 ? 0 : 1;
    float* mine = ws + ((size_t)slot * 2 + part) * BM * BN;
    const float* other = ws + ((size_t)slot * 2 + (1 - part)) * BM * BN;
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) mine[(i * 8 + j) * 256 + threadIdx.x] = acc[i][j];
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) second = atomicAdd(&arrived[slot], 1);
    __syncthreads();
    if (second == 0) continue;
    __threadfence();
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[i][j] += __ldcg(&other[(i * 8 + j) * 256 + threadIdx.x]);
    store_tile(C, N, row0, col0, acc);
    if (threadIdx.x == 0) arrived[slot] = 0;  // ready for the next call
  }
}

}  // namespace sk

static int g_slots = 0;
static float* g_ws = nullptr;
static int* g_arrived = nullptr;

template <bool S>
static void launch_sk(const float* A, const float* B, float* C, int n) {
  const int tiles = (n / 128) * (n / 128);
  if (tiles <= g_slots) {  // under one wave: the shipped grid
    matmul_regtile<<<dim3(n / 128, n / 128), 256>>>(A, B, C, n, n, n);
    return;
  }
  const int dp_tiles = (tiles / g_slots - 1) * g_slots;
  sk::regtile_sk<S><<<g_slots, 256>>>(A, B, C, n, n, n, dp_tiles, g_ws, g_arrived);
}
static void launch_v0(const float* A, const float* B, float* C, int n) {
  matmul_regtile<<<dim3(n / 128, n / 128), 256>>>(A, B, C, n, n, n);
}

typedef void (*Launch)(const float*, const float*, float*, int);
static float run(Launch l, const float* A, const float* B, float* C, int n, int reps) {
  for (int i = 0; i < 3; ++i) l(A, B, C, n);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<float> ts;
  for (int i = 0; i < reps; ++i) {
    cudaEventRecord(e0);
    l(A, B, C, n);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    ts.push_back(ms);
  }
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}

int main() {
  int sms = 0, per_sm = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, sk::regtile_sk<false>, 256, 0);
  g_slots = sms * per_sm;
  cudaMalloc(&g_ws, (size_t)g_slots * 2 * 128 * 128 * 4);
  cudaMalloc(&g_arrived, g_slots * sizeof(int));
  cudaMemset(g_arrived, 0, g_slots * sizeof(int));
  printf("SMs %d, blocks an SM %d: %d slots\n", sms, per_sm, g_slots);
  for (int n : {4096, 8192, 2048, 6144, 4096}) {
    size_t bytes = (size_t)n * n * 4;
    std::vector<float> h(n * (size_t)n), ref(n * (size_t)n), got(n * (size_t)n);
    float *A, *B, *C0, *C;
    cudaMalloc(&A, bytes); cudaMalloc(&B, bytes); cudaMalloc(&C0, bytes); cudaMalloc(&C, bytes);
    srand(n);
    for (auto& x : h) x = rand() / (float)RAND_MAX - 0.5f;
    cudaMemcpy(A, h.data(), bytes, cudaMemcpyHostToDevice);
    for (auto& x : h) x = rand() / (float)RAND_MAX - 0.5f;
    cudaMemcpy(B, h.data(), bytes, cudaMemcpyHostToDevice);
    const int reps = n >= 8192 ? 10 : 30;
    const float t0 = run(launch_v0, A, B, C0, n, reps);
    cudaMemset(C, 0, bytes);
    cudaMemcpy(ref.data(), C0, bytes, cudaMemcpyDeviceToHost);
    double worst = 0, scale = 0;
    auto compare = [&] {  // the split kernel's C against the shipped kernel's
      cudaMemcpy(got.data(), C, bytes, cudaMemcpyDeviceToHost);
      for (size_t i = 0; i < got.size(); ++i) {
        worst = std::max(worst, (double)fabsf(got[i] - ref[i]));
        scale = std::max(scale, (double)fabsf(ref[i]));
      }
      cudaMemset(C, 0, bytes);
    };
    const float t1 = run(launch_sk<false>, A, B, C, n, reps);
    compare();
    const float t3 = run(launch_sk<true>, A, B, C, n, reps);
    compare();
    const float t2 = run(launch_v0, A, B, C0, n, reps);
    cudaError_t err = cudaDeviceSynchronize();
    const double f = 2.0 * n * n * (double)n / 1e9;
    printf("n=%d shipped %.3f/%.3f ms (%.1f/%.1f TFLOP/s)  stream-K %.3f ms (%.1f TFLOP/s, %+.1f%%)  "
           "stream-K, state in shared %.3f ms (%.1f TFLOP/s)  maxdiff %.2e of %.1f %s\n",
           n, t0, t2, f / t0, f / t2, t1, f / t1, 100.0 * (std::min(t0, t2) / t1 - 1), t3, f / t3, worst, scale,
           err ? cudaGetErrorString(err) : "");
    cudaFree(A); cudaFree(B); cudaFree(C0); cudaFree(C);
  }
}
