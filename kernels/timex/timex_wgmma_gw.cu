// timex-wgmma's gw (version 8) on Hopper's wgmma (sm_90a), bfloat16 or float16 in and out, float32 sums;
// timex_wgmma.cu's limits (T <= 768, T % 8 == 0).
//
// What it adds over timex-mma's gw (mma.sync over 16 batch rows a block, partial sums in global memory and a
// second kernel to add them): a block takes one channel and all its batch rows, 32 at a time, as G's and K's
// 64-step tiles brought by TMA; wgmma reads both operands from shared memory as TMA wrote them (MN-major: t
// runs along the 128-byte rows), so nothing is staged by hand. The lags are added in a fixed order, without
// atomics: gw is the same bit for bit from run to run.
//
// gw[c, T-1-d] = sum_b sum_u g[b, u+d] k[b, u] = sum_u P[u+d, u],  P = Gᵀ K over the batch rows (timex.h).
// Cut into 64 × 64 tiles, P's tile (s-tile m + D, u-tile m) holds the lags d = 64D + r - q (row r, column q)
// whatever m, so the tiles of one diagonal D add up in one accumulator before any fold:
//   acc_D = sum_m G_{m+D}ᵀ K_m   (wgmma m64n64k16; A = G's tile transposed, B = K's tile, both MN-major;
//                                 16 batch rows a step)
// Warpgroup g takes the diagonals D with (D + 1) / 2 % 2 == g: 0, 3, 4, 7, 8, 11 and 1, 2, 5, 6, 9, 10, in
// pairs (2n, 2n + 1). Both run nt - 2n products on each pair, the one with fewer multiplying a tile of zeros
// last, so that no wgmma sits behind a branch that differs between the warpgroups (ptxas would serialise
// them): 42 products each at 12 tiles, where 39 would do.
//
// The fold of acc_D into lags. Thread (warp w of its warpgroup, lane = 4·q4 + c4) holds rows 16w + q4 (+8·hi)
// and columns 8j + 2·c4 (+x): lag 64D + 16w + q4 - 2·c4 - x + 8(hi - j). Row +8 and column +8 is the same lag,
// so the thread adds those first (9 sums for each x, L = hi - j in -7..1). Lane + 4's x = 1 sums fall on its
// own x = 0 lags (for q4 = 7, lane q4 = 0's, one L lower), so it takes them: its 10 sums then lie at
// q4 - 2·c4 + 8L (L in -8..1). The 4 lanes with the same (q4 - 2·c4) mod 8 (one per c4) hold the same lags,
// on grids one step apart: each aligns its sums to the class's grid and the four add them (two shuffle
// steps). Then each of the warp's 88 lags is one lane's to write into the warp's window, and the warpgroup
// adds its 4 windows, in warp order, into its lags. No atomics, so the order of every sum is fixed.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cudabench/hopper.cuh"
#include "timex.h"
#include "timex_tiles.cuh"

namespace timex_gw_wgmma {

using namespace cudabench::hopper;
using timex_tiles::from_f;
using timex_tiles::MAX_TILES;
using timex_tiles::ROWS;
using timex_tiles::TILE;

constexpr int THREADS = 256;  // two warpgroups
constexpr int LO = 72;        // a warp's window holds its lags 64D + 16w + o for o in -LO .. 15
constexpr int WINDOW = LO + 16;
constexpr int SUMS = 10;      // a thread's sums after the fold's first steps: L = -8 .. 1
constexpr int GRID = 11;      // its class's sums, on the class's grid

template <typename S>
struct Shared {
  S g[MAX_TILES][ROWS * TILE];  // G's and K's tiles as TMA writes them: [b][t], 128-byte swizzled
  S k[MAX_TILES][ROWS * TILE];
  S zeros[ROWS * TILE];
  float lags[2][MAX_TILES * TILE];  // each warpgroup's sums by lag d
  float window[8][WINDOW];          // each warp's sums of one diagonal
  uint64_t full[MAX_TILES];         // G's tile nt-1-i and K's tile i have landed (the order the products need them)
};

// acc_D into the calling warpgroup's lags (above)
__device__ __forceinline__ void fold(const float* acc, float (*windows)[WINDOW], float* lags, int D, int T) {
  const int wg = threadIdx.x / 128, w = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32, q4 = lane / 4, c4 = lane % 4;
  float sum[2][SUMS];  // [x][L + 8]: lag 64D + 16w + q4 - 2·c4 - x + 8L
#pragma unroll
  for (int x = 0; x < 2; ++x)
#pragma unroll
    for (int i = 0; i < SUMS; ++i) sum[x][i] = 0.0f;
#pragma unroll
  for (int j = 0; j < 8; ++j)
#pragma unroll
    for (int hi = 0; hi < 2; ++hi)
#pragma unroll
      for (int x = 0; x < 2; ++x) sum[x][hi - j + 8] += acc[4 * j + 2 * hi + x];
#pragma unroll
  for (int i = 0; i < SUMS; ++i) {
    const float v = __shfl_sync(0xffffffffu, sum[1][i], (lane + 4) % 32);
    if (q4 < 7) sum[0][i] += v;
    else if (i > 0) sum[0][i - 1] += v;
  }
  // sum[0][i] lies at rho + 8(i - 8 - neg) with rho = (q4 - 2·c4) mod 8 and neg = q4 < 2·c4: aligned to the
  // class rho's grid, total[a] at rho + 8(a - 9)
  const int rho = (q4 - 2 * c4) & 7;
  const bool neg = q4 < 2 * c4;
  float total[GRID];
#pragma unroll
  for (int a = 0; a < GRID; ++a) {
    const float lower = a >= 1 && a - 1 < SUMS ? sum[0][a - 1] : 0.0f, same = a < SUMS ? sum[0][a] : 0.0f;
    total[a] = neg ? same : lower;
  }
  // the 4 lanes of class rho (one per c4: q4 = (rho + 2·c4) mod 8) add theirs, pairs then halves
#pragma unroll
  for (int step = 1; step <= 2; step *= 2) {
    const int partner = c4 ^ step, from = 4 * ((rho + 2 * partner) & 7) + partner;
#pragma unroll
    for (int a = 0; a < GRID; ++a) total[a] += __shfl_sync(0xffffffffu, total[a], from);
  }
  float* window = windows[4 * wg + w];  // every entry written once: no zeroing, no read
#pragma unroll
  for (int a = 0; a < GRID; ++a)
    if (a % 4 == c4) window[rho + 8 * (a - 9) + LO] = total[a];
  named_barrier_sync(1 + wg, 128);  // the warpgroup's 4 windows are complete
  for (int o = threadIdx.x % 128 - LO; o < 16 * 4; o += 128) {  // lag 64D + o: entry o - 16w of window w
    float v = 0.0f;
#pragma unroll
    for (int ww = 0; ww < 4; ++ww) {
      const int i = o - 16 * ww + LO;
      if (i >= 0 && i < WINDOW) v += windows[4 * wg + ww][i];
    }
    const int d = TILE * D + o;
    if (d >= 0 && d < T) lags[d] += v;
  }
  named_barrier_sync(1 + wg, 128);  // the windows are read before the next diagonal's are written
}

// acc = sum over m < count of G's tile m + D (zeros past the last) transposed times K's tile m, issued and
// committed as one group (D >= nt: every product is with zeros)
template <typename S, bool F16, int COUNT>
__device__ __forceinline__ void products(float* acc, Shared<S>& s, int D, int nt, uint32_t parity) {
  constexpr uint64_t K_STEP = (16 * TILE * sizeof(S)) >> 4;  // 16 batch rows further, in descriptor units
  // G's tiles D.. and K's tiles ..COUNT-1 came with the first COUNT loads (D >= nt - COUNT). Waiting between
  // the products would serialise them.
#pragma unroll
  for (int i = 0; i < COUNT; ++i) mbar_wait(&s.full[i], parity);
  // one base descriptor each plus byte offsets (/16): nvcc would otherwise keep a 64-bit descriptor per tile live
  // across the unrolled pairs (and spill them)
  constexpr uint32_t TILE_BYTES = ROWS * TILE * sizeof(S);
  const uint64_t g_desc = desc_mn_major_sw128(s.g[0], 0), k_desc = desc_mn_major_sw128(s.k[0], 0);
  const uint32_t zeros_off = (uint32_t)((uint8_t*)s.zeros - (uint8_t*)s.g[0]);
  wgmma_fence();
#pragma unroll 1
  for (int m = 0; m < COUNT; ++m) {  // not unrolled: the descriptors made as they are used
    const uint64_t da = g_desc + ((m + D < nt ? (m + D) * TILE_BYTES : zeros_off) >> 4);
    const uint64_t db = k_desc + ((m * TILE_BYTES) >> 4);
#pragma unroll
    for (int kk = 0; kk < ROWS / 16; ++kk) {
      if constexpr (F16)  // <TransB, TransA>: both MN-major
        wgmma_m64n64k16_f16<1, 1>(acc, da + kk * K_STEP, db + kk * K_STEP, m > 0 || kk > 0);
      else
        wgmma_m64n64k16_bf16<1, 1>(acc, da + kk * K_STEP, db + kk * K_STEP, m > 0 || kk > 0);
    }
  }
  wgmma_commit();
}

// warpgroup wg's diagonal of pair n: may be nt (all its products zero)
__device__ __forceinline__ int diagonal(int n, int wg) { return 2 * n + ((n ^ wg) & 1); }

// The pairs run last first (pair n has nt - 2n products, on G's tiles 2n.. and K's tiles ..nt-1-2n: the first
// ones need the fewest tiles, so a block's products start while most of its tiles are still landing). The
// Q-th pair's sums are folded while the next pair's products run (two sets of accumulators), then the pairs
// after it; the Q-th pair's products are issued already.
template <int NT, int Q>
constexpr int pair_at = (NT + 1) / 2 - 1 - Q;

template <typename S, bool F16, int NT, int Q>
__device__ __forceinline__ void fold_pairs(float (&acc)[2][TILE / 2], Shared<S>& s, int wg, uint32_t parity, int T) {
  constexpr int PAIRS = (NT + 1) / 2;
  if constexpr (Q < PAIRS) {
    if constexpr (Q + 1 < PAIRS) {
      constexpr int next = pair_at<NT, Q + 1>;
      products<S, F16, NT - 2 * next>(acc[(Q + 1) % 2], s, diagonal(next, wg), NT, parity);
      wgmma_wait<1>();
    } else {
      wgmma_wait<0>();
    }
    fold(acc[Q % 2], s.window, s.lags[wg], diagonal(pair_at<NT, Q>, wg), T);
    fold_pairs<S, F16, NT, Q + 1>(acc, s, wg, parity, T);
  }
}

// A block per channel: gw[c, :] over all its batch rows, ROWS at a time. NT = ceil(T / 64) tiles, a
// compile-time count: the pairs unroll, so ptxas sees which group of products each fold waits for.
template <typename S, bool F16, int NT>
__global__ void __launch_bounds__(THREADS, 2) gw_kernel(const __grid_constant__ CUtensorMap map_k,
                                                     const __grid_constant__ CUtensorMap map_g, S* __restrict__ gw,
                                                     int B, int C, int T) {
#if defined(CUDABENCH_HOPPER)
  extern __shared__ uint8_t raw[];
  auto& s = *reinterpret_cast<Shared<S>*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
  constexpr int nt = NT;
  const int c = blockIdx.x, groups = (B + ROWS - 1) / ROWS, wg = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    for (int i = 0; i < nt; ++i) mbar_init(&s.full[i], 1);
    mbar_fence_init();
  }
  for (int i = threadIdx.x; i < 2 * MAX_TILES * TILE; i += THREADS) (&s.lags[0][0])[i] = 0.0f;
  for (int i = threadIdx.x; i < ROWS * TILE; i += THREADS) s.zeros[i] = from_f<S>(0.0f);
  fence_proxy_async();  // the zero tile, written here, is read by wgmma (the async proxy)
  __syncthreads();
  for (int group = 0; group < groups; ++group) {
    if (threadIdx.x == 0)
      for (int i = 0; i < nt; ++i) {
        mbar_arrive_expect_tx(&s.full[i], 2 * ROWS * TILE * sizeof(S));
        tma_load_3d(s.g[nt - 1 - i], &map_g, &s.full[i], TILE * (nt - 1 - i), c, ROWS * group);
        tma_load_3d(s.k[i], &map_k, &s.full[i], TILE * i, c, ROWS * group);
      }
    float acc[2][TILE / 2];
    constexpr int first = pair_at<nt, 0>;
    products<S, F16, nt - 2 * first>(acc[0], s, diagonal(first, wg), nt, group & 1);
    fold_pairs<S, F16, nt, 0>(acc, s, wg, group & 1, T);
    __syncthreads();  // every product has read this group's tiles before the next group's land there
  }
  for (int d = threadIdx.x; d < T; d += THREADS) gw[(size_t)c * T + T - 1 - d] = from_f<S>(s.lags[0][d] + s.lags[1][d]);
#else
  __trap();
#endif
}

template <typename S, bool F16, int NT = 1>
cudaError_t launch(int nt, const CUtensorMap& map_k, const CUtensorMap& map_g, void* gw, int B, int C, int T,
                   cudaStream_t stream) {
  if constexpr (NT < MAX_TILES) {
    if (nt > NT) return launch<S, F16, NT + 1>(nt, map_k, map_g, gw, B, C, T, stream);
  }
  const size_t bytes = sizeof(Shared<S>) + 1024;
  auto kernel = gw_kernel<S, F16, NT>;
  const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
  if (err != cudaSuccess) return err;
  kernel<<<C, THREADS, bytes, stream>>>(map_k, map_g, (S*)gw, B, C, T);
  return cudaGetLastError();
}

}  // namespace timex_gw_wgmma

cudaError_t timex_wgmma_gw(TimexDtype dtype, const void* k, const void* g, void* gw, int B, int C, int T,
                           cudaStream_t stream) {
  using namespace timex_gw_wgmma;
  if (dtype == TIMEX_F32 || cudabench::hopper::not_on_hopper() || B <= 0 || C <= 0 || T <= 0 ||
      T > TIMEX_WGMMA_TMAX || T % 8)
    return cudaErrorInvalidValue;
  for (const void* p : {k, g})  // TMA
    if (reinterpret_cast<uintptr_t>(p) % 16) return cudaErrorInvalidValue;
  const bool f16 = dtype == TIMEX_F16;
  CUtensorMap map_k, map_g;
  if (!timex_tiles::row_tiles_map(&map_k, k, B, C, T, f16) || !timex_tiles::row_tiles_map(&map_g, g, B, C, T, f16))
    return cudaErrorInvalidValue;
  const int nt = (T + TILE - 1) / TILE;
  return f16 ? launch<__half, true>(nt, map_k, map_g, gw, B, C, T, stream)
             : launch<__nv_bfloat16, false>(nt, map_k, map_g, gw, B, C, T, stream);
}
