// timex-wgmma (version 8): the forward and gk on Hopper's wgmma (sm_90a), bfloat16 or float16 in and out,
// float32 sums; T <= 768, T % 8 == 0, any B and C. gw is timex_wgmma_gw.cu.
//
// What it adds over timex-mma (mma.sync, the rung below): warpgroup products (wgmma m64n32k16, A from
// registers, B from shared memory), K's tiles brought by TMA (a 3-D tensor map, 128-byte swizzle, one
// mbarrier a tile), and persistent blocks that fetch the next item's K tiles and w row while the current
// item's products run. At B=32, C=768, T=768 it is 13-15 % faster than timex-mma's forward (H100,
// docs/benchmarks/h100-hopper.md).
//
// Per channel c and 32 batch rows b, transposed:  OUTᵀ (T × 32) = Wf (T × T) · Kᵀ (T × 32), with
// Wf[t, u] = w[c, T-1-t+u] for u <= t, else 0. Cut into 64 × 64 tiles, Wf's tile (t-tile j, u-tile i)
// depends only on d = j - i: A_d[r][q] = w[T-1-64d-r+q] (zero past either end of w, which is also the
// causal mask inside A_0). So each warpgroup loads A_d once into its registers, as wgmma's A fragments
// (two consecutive q of one row in a register: a pair (w[x], w[x+1]) read whole from a table of such
// pairs), and multiplies it into every output tile j >= d it holds:
//   acc_j += A_d · K_{j-d}   (m64n32k16 × 4 per tile pair; K_i = rows b of k[b, c, 64i .. 64i+63])
// d runs from the last tile down, so the step at d needs K tiles 0 .. nt-1-d: the tiles land in the
// order they are first needed. Two blocks share a channel's 32 batch rows, share H taking output tiles
// 4q + 2H and 4q + 2H + 1 (q < 3), one per warpgroup in each slot q: 48 registers of sums a thread.
// Both warpgroups issue the same products in the same order, with no branch between them: where only the
// second's tile has a pair at step d, the first multiplies a tile of zeros (a wgmma behind a branch that
// ptxas cannot prove uniform across the warpgroup is serialised).
//
// gk (BACK) is the same product with G's rows for K's and Wb = Wfᵀ: GKᵀ = Wfᵀ · Gᵀ, whose tile (j, i = j + d)
// is A_dᵀ, A_dᵀ[r][q] = w[T-1-64d+r-q] (pairs (w[x], w[x-1])), multiplied into tile j from G's tile j + d.
// The step at d then needs G's tiles d .. nt-1, so they are fetched last first.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "cudabench/hopper.cuh"
#include "cudabench/tensor_core.cuh"
#include "timex.h"
#include "timex_tiles.cuh"

namespace timex_wgmma {

using namespace cudabench::hopper;

using timex_tiles::MAX_TILES;     // T <= 768
using timex_tiles::ROWS;          // batch rows per block (wgmma's N)
using timex_tiles::TILE;          // t and u per tile
constexpr int HALVES = 2;         // blocks per channel and 32 batch rows, each with half of the output tiles
constexpr int SLOTS = 3;          // output tiles per warpgroup
constexpr int THREADS = 256;      // two warpgroups
constexpr int PAD = 64;           // zeros kept on each side of the staged w row

using timex_tiles::from_f;

// The products and the stores of block share H: warpgroup g holds output tiles j = 4q + 2H + g
// k: the item's K tiles (zeros_off bytes before the zero tile), pairs: its w pairs, k_full: the tiles'
// mbarriers, waited on with `parity`
template <typename S, bool F16, bool BACK, int NT, int H>
__device__ __forceinline__ void output_tiles(S (*k)[ROWS * TILE], const uint32_t* pairs, uint32_t zeros_off,
                                             uint64_t* k_full, uint32_t parity, int c, int b0, S* __restrict__ out,
                                             float eps, int B, int C, int T) {
  constexpr int nt = NT;
  const int g = threadIdx.x / 128;
  float acc[SLOTS][ROWS / 2];
#pragma unroll
  for (int q = 0; q < SLOTS; ++q)
#pragma unroll
    for (int e = 0; e < ROWS / 2; ++e) acc[q][e] = 0.0f;

  const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
  // A_d's fragment for k-slice kk: rows r = 16·warp + lane/4 (+8), columns q = 16kk + 2(lane%4) (+8), so
  // x = T-1-64d-r+q (gk: T-1-64d+r-q, the pairs then (w[x], w[x-1])); the register of row +8 and column +8 is
  // the first one's pair again
  constexpr int dir = BACK ? -1 : 1;  // which way x moves with the column q
  const uint32_t* pair_row = pairs + PAD + T - 1 - dir * (16 * warp + lane / 4) + dir * 2 * (lane % 4);
  // B descriptors as one base plus a byte offset (/16 in the start-address field): nvcc would otherwise keep
  // a 64-bit descriptor per K tile and k-slice live across the unrolled steps
  const uint64_t k_desc = desc_k_major_sw128(k[0]);
  constexpr uint32_t K_TILE_BYTES = ROWS * TILE * sizeof(S);
#pragma unroll
  for (int d = nt - 1; d >= 0; --d) {
    uint32_t a[TILE / 16][4];
#pragma unroll
    for (int kk = 0; kk < TILE / 16; ++kk) {
      const uint32_t* p = pair_row - TILE * d + dir * 16 * kk;
      a[kk][0] = p[0];
      a[kk][1] = p[-8 * dir];
      a[kk][2] = p[8 * dir];
      a[kk][3] = a[kk][0];
    }
    mbar_wait(&k_full[BACK ? d : nt - 1 - d], parity);
    wgmma_fence();
#pragma unroll
    for (int q = 0; q < SLOTS; ++q) {
      // skip when neither warpgroup's tile has a pair at d: the K tile i = j - d (gk: j + d) exists
      if (BACK ? 4 * q + 2 * H + d >= nt : 4 * q + 2 * H + 1 < d || 4 * q + 2 * H >= nt) continue;
      const int j = 4 * q + 2 * H + g;
      const int i = BACK ? j + d : j - d;  // (the gk test as written keeps ptxas from spilling)
      const uint32_t kt = BACK ? (i >= 0 && i < nt && j < nt ? i * K_TILE_BYTES : zeros_off)
                               : (j >= d && j < nt ? i * K_TILE_BYTES : zeros_off);
#pragma unroll
      for (int kk = 0; kk < TILE / 16; ++kk) {
        const uint64_t db = k_desc + ((kt + kk * 32) >> 4);
        if constexpr (F16)
          wgmma_m64n32k16_f16_rs<0>(acc[q], a[kk], db, 1);
        else
          wgmma_m64n32k16_bf16_rs<0>(acc[q], a[kk], db, 1);
      }
    }
    wgmma_commit();
    wgmma_wait<0>();  // a[] is read by the products until they finish
  }
  wgmma_wait<0>();
  __syncthreads();  // no product reads the K tiles any more: they hold the outputs now

  // acc[q][4i + r] is out at t = 64j + 16·warp + lane/4 (+8 for r >= 2), b = b0 + 8i + 2·(lane%4) + (r & 1).
  // Each warpgroup stages its tiles in its half of the K tiles as [b][t] (16-byte chunks of t swizzled by
  // b % 8: conflict-free), then writes whole 16-byte chunks of out's rows.
  S* stage = k[g * SLOTS];
#pragma unroll
  for (int q = 0; q < SLOTS; ++q) {
    if (4 * q + 2 * H >= nt) continue;
#pragma unroll
    for (int e = 0; e < ROWS / 2; ++e) {
      const int t = 16 * warp + lane / 4 + 8 * ((e % 4) / 2), b = 8 * (e / 4) + 2 * (lane % 4) + (e & 1);
      stage[q * ROWS * TILE + b * TILE + (((t / 8) ^ (b % 8)) * 8) + t % 8] = from_f<S>(eps + acc[q][e]);
    }
  }
  named_barrier_sync(1 + g, 128);
  for (int i = threadIdx.x % 128; i < SLOTS * ROWS * 8; i += 128) {
    const int q = i / (ROWS * 8), b = (i / 8) % ROWS, p = i % 8, j = 4 * q + 2 * H + g, t = TILE * j + 8 * p;
    if (j < nt && t < T && b0 + b < B)
      *reinterpret_cast<uint4*>(out + ((size_t)(b0 + b) * C + c) * T + t) =
          *reinterpret_cast<const uint4*>(stage + q * ROWS * TILE + b * TILE + ((p ^ (b % 8)) * 8));
  }
  fence_proxy_async();  // every thread's staged writes and reads come before a later TMA refills these tiles
}

// output_tiles for this block's share (blockIdx.y, fixed for the block: a branch ptxas sees as uniform)
template <typename S, bool F16, bool BACK, int NT>
__device__ __forceinline__ void block_share(S (*k)[ROWS * TILE], const uint32_t* pairs, uint32_t zeros_off,
                                            uint64_t* k_full, uint32_t parity, int c, int b0, S* __restrict__ out,
                                            float eps, int B, int C, int T) {
  if (blockIdx.y == 0)
    output_tiles<S, F16, BACK, NT, 0>(k, pairs, zeros_off, k_full, parity, c, b0, out, eps, B, C, T);
  else
    output_tiles<S, F16, BACK, NT, 1>(k, pairs, zeros_off, k_full, parity, c, b0, out, eps, B, C, T);
}

// NT = ceil(T / 64) tiles, a compile-time count: the loop over d unrolls, so which products a step makes is
// fixed in the code. Persistent: a block per slot takes items (channel, 32 batch rows) in turn, its share
// fixed by blockIdx.y. While it multiplies one item, the next one's K tiles (TMA) and w row (cp.async)
// land in the other buffer.
template <typename S>
struct Shared {
  S k[2][MAX_TILES][ROWS * TILE];
  S zeros[ROWS * TILE];
  uint32_t pairs[MAX_TILES * TILE + 2 * PAD];
  S w[2][MAX_TILES * TILE + 2 * PAD + 8];
  uint64_t k_full[2][MAX_TILES];
};

template <typename S, bool F16, bool BACK, int NT>
__global__ void __launch_bounds__(THREADS, 2)
    toeplitz(const __grid_constant__ CUtensorMap map_k, const S* __restrict__ w, S* __restrict__ out, float eps,
            int B, int C, int T) {
#if defined(CUDABENCH_HOPPER)
  extern __shared__ uint8_t raw[];
  auto& s = *reinterpret_cast<Shared<S>*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
  constexpr int nt = NT;
  const int items = C * ((B + ROWS - 1) / ROWS);
  if (threadIdx.x == 0) {
    for (int i = 0; i < 2 * nt; ++i) mbar_init(&s.k_full[i / nt][i % nt], 1);
    mbar_fence_init();
  }
  const S zero = from_f<S>(0.0f);
  for (int i = threadIdx.x; i < ROWS * TILE; i += THREADS) s.zeros[i] = zero;
  for (int i = threadIdx.x; i < 2 * (MAX_TILES * TILE + 2 * PAD + 8); i += THREADS) (&s.w[0][0])[i] = zero;
  fence_proxy_async();  // the zero tile, written here, is read by wgmma (the async proxy)
  __syncthreads();
  // item -> its K tiles and w row into buffer p (the w row's 16-byte chunks: T % 8 == 0)
  auto fetch = [&](int item, int p) {
    const int c = item % C, b0 = (item / C) * ROWS;
    if (threadIdx.x == 0) {
      fence_proxy_async();  // this buffer's earlier reads and writes (the staged outputs) come first
      for (int n = 0; n < nt; ++n) {  // in the order the steps first need them
        const int i = BACK ? nt - 1 - n : n;
        mbar_arrive_expect_tx(&s.k_full[p][i], ROWS * TILE * sizeof(S));
        tma_load_3d(s.k[p][i], &map_k, &s.k_full[p][i], TILE * i, c, b0);
      }
    }
    for (int i = threadIdx.x; i < T / 8; i += THREADS)
      tensor_core::cp_async_16(&s.w[p][PAD + 8 * i], w + (size_t)c * T + 8 * i, true);
    tensor_core::cp_async_commit();
  };
  if (blockIdx.x < items) fetch(blockIdx.x, 0);
  int n = 0;
  for (int item = blockIdx.x; item < items; item += gridDim.x, ++n) {
    const int p = n & 1, c = item % C, b0 = (item / C) * ROWS;
    tensor_core::cp_async_wait<0>();
    __syncthreads();  // this item's w row has landed; the last item's staged outputs are read and its pairs used
    const uint16_t* wbits = reinterpret_cast<const uint16_t*>(s.w[p]);
    for (int i = threadIdx.x; i < nt * TILE + 2 * PAD; i += THREADS)  // (w[x], w[x + 1]); gk: (w[x], w[x - 1])
      s.pairs[i] = wbits[i] | (uint32_t)(BACK ? (i > 0 ? wbits[i - 1] : 0) : wbits[i + 1]) << 16;
    __syncthreads();
    if (item + (int)gridDim.x < items) fetch(item + gridDim.x, p ^ 1);
    block_share<S, F16, BACK, NT>(s.k[p], s.pairs, (uint32_t)((uint8_t*)s.zeros - (uint8_t*)s.k[p][0]), s.k_full[p],
                            (n >> 1) & 1, c, b0, out, eps, B, C, T);
  }
#else
  __trap();
#endif
}

template <typename S, bool F16, bool BACK, int NT = 1>
cudaError_t launch_nt(int nt, int blocks, const CUtensorMap& map, const void* w, void* out, float eps, int B, int C,
                      int T, cudaStream_t stream) {
  if constexpr (NT < MAX_TILES) {
    if (nt > NT) return launch_nt<S, F16, BACK, NT + 1>(nt, blocks, map, w, out, eps, B, C, T, stream);
  }
  auto kernel = toeplitz<S, F16, BACK, NT>;
  const size_t bytes = sizeof(Shared<S>) + 1024;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
  int sms = 5, per_sm = 1;  // on the CPU emulator: 2 blocks a share, so that each takes several items
#if !defined(CUDABENCH_EMULATED)
  int device = 0;
  if (err == cudaSuccess) err = cudaGetDevice(&device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (err == cudaSuccess) err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, THREADS, bytes);
#endif
  if (err != cudaSuccess) return err;
  const int slots = std::max(1, sms * std::max(per_sm, 1) / HALVES);  // blocks of each share that fit at once
  kernel<<<dim3(std::min(blocks, slots), HALVES), THREADS, bytes, stream>>>(map, (const S*)w, (S*)out, eps, B, C, T);
  return cudaGetLastError();
}

}  // namespace timex_wgmma

const char* timex_wgmma_not_here() { return cudabench::hopper::not_on_hopper(); }

const char* timex_wgmma_unsupported(int B, int C, int T) {
  if (B <= 0 || C <= 0 || T <= 0) return "B, C and T must be positive";
  if (T > TIMEX_WGMMA_TMAX) return "T must be at most 768 (12 tiles of 64: the sums of six a thread)";
  if (T % 8) return "T must be a multiple of 8 (the rows are read in 16-byte pieces: TMA and cp.async)";
  return nullptr;
}

namespace timex_wgmma {

// out = eps + the forward of x (BACK false), or gk with x = g (BACK true, eps 0)
template <bool BACK>
cudaError_t launch(TimexDtype dtype, const void* w, const void* x, void* out, float eps, int B, int C, int T,
                   cudaStream_t stream) {
  if (dtype == TIMEX_F32 || timex_wgmma_not_here() || timex_wgmma_unsupported(B, C, T)) return cudaErrorInvalidValue;
  for (const void* p : {w, x, (const void*)out})  // TMA, cp.async and the 16-byte stores
    if (reinterpret_cast<uintptr_t>(p) % 16) return cudaErrorInvalidValue;
  const bool f16 = dtype == TIMEX_F16;
  CUtensorMap map;
  if (!timex_tiles::row_tiles_map(&map, x, B, C, T, f16)) return cudaErrorInvalidValue;
  const int blocks = C * ((B + ROWS - 1) / ROWS), nt = (T + TILE - 1) / TILE;
  return f16 ? launch_nt<__half, true, BACK>(nt, blocks, map, w, out, eps, B, C, T, stream)
             : launch_nt<__nv_bfloat16, false, BACK>(nt, blocks, map, w, out, eps, B, C, T, stream);
}

}  // namespace timex_wgmma

cudaError_t timex_wgmma_forward(TimexDtype dtype, const void* w, const void* k, void* out, float eps, int B, int C,
                                int T, cudaStream_t stream) {
  return timex_wgmma::launch<false>(dtype, w, k, out, eps, B, C, T, stream);
}

cudaError_t timex_wgmma_gk(TimexDtype dtype, const void* w, const void* g, void* gk, int B, int C, int T,
                           cudaStream_t stream) {
  return timex_wgmma::launch<true>(dtype, w, g, gk, 0.0f, B, C, T, stream);
}
