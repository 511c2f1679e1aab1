// matmul-wgmma: C = A · B in bfloat16 with float32 sums, on the Hopper pipeline (sm_90a).
//
// What it adds over matmul-regtile (the rung below, float32 FMAs fed by the threads' own loads):
//   - TMA: one thread asks the copy engine for whole 2-D tiles (cp.async.bulk.tensor), written to shared
//     memory in the 128-byte swizzled layout that wgmma reads without bank conflicts;
//   - mbarriers: the copy engine counts the bytes it delivers into a barrier, which the consumers wait on
//     ("full"); the consumers arrive on a second barrier when a buffer may be refilled ("empty");
//   - wgmma: a warpgroup (128 threads) multiplies a 64×BN×16 slice straight from shared memory into its
//     registers, asynchronously; the next slice's instruction is issued before the last one has finished;
//   - warp specialisation: warpgroup 0 only loads (one thread, 24 registers), warpgroups 1 and 2 only
//     multiply (64 rows of the 128-row tile each, 240 registers: setmaxnreg moves the budget between them);
//   - grouped tile order: the blocks that run at once cover GROUP_M row tiles × a few column tiles, not
//     one or two rows of tiles across all of B, so their A and B panels stay in L2 (at 8192³ in plain row
//     order B is re-read from DRAM by every wave: ncu showed DRAM 87 % busy, the SMs 41 %).
//
// A is M×K row-major (K-major for wgmma). B is K×N row-major as torch keeps it, so wgmma reads it
// MN-major (its transpose bit), in boxes of 64 columns. C is M×N row-major bfloat16. Whole tiles only:
// M a multiple of 128, N of BN, K of 64 (the variant's constraint). Plain CUDA, no torch headers.
#include <cuda_bf16.h>

#include "cudabench/hopper.cuh"
#include "matmul_wgmma.h"

namespace {

using namespace cudabench::hopper;

constexpr int BM = 128, BK = 64;
#ifndef MATMUL_WGMMA_GROUP_M  // set by scratch timing builds only
#define MATMUL_WGMMA_GROUP_M 16
#endif
constexpr int GROUP_M = MATMUL_WGMMA_GROUP_M;  // row tiles per group of the tile order
constexpr int CONSUMERS = 2;                    // warpgroups that multiply, 64 rows each
constexpr int THREADS = 128 * (CONSUMERS + 1);  // and one that loads

template <int BN>
struct Tile {
  static constexpr int STAGES = BN == 256 ? 4 : 6;  // 192 KB of buffers either way
  static constexpr int A = BM * BK, B = BN * BK;   // elements per stage
  static constexpr uint32_t STAGE_BYTES = (A + B) * sizeof(__nv_bfloat16);
  struct Shared {
    __nv_bfloat16 a[STAGES][A];  // each a multiple of 1024 bytes: aligned as the 128 B swizzle needs
    __nv_bfloat16 b[STAGES][B];
    uint64_t full[STAGES];   // TMA -> consumers: the buffer holds its k-tile
    uint64_t empty[STAGES];  // consumers -> producer: the buffer may be refilled
  };
  static constexpr size_t SHARED_BYTES = sizeof(Shared) + 1024;  // room to align the base to 1024
};

template <int BN>
__global__ void __launch_bounds__(THREADS, 1)
    matmul_wgmma_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                        __nv_bfloat16* __restrict__ c, int M, int N, int K) {
#if defined(CUDABENCH_HOPPER)
  using T = Tile<BN>;
  extern __shared__ uint8_t raw[];
  auto& s = *reinterpret_cast<typename T::Shared*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
  const int group = threadIdx.x / 128, t128 = threadIdx.x % 128;
  // block b -> (row tile, column tile): GROUP_M row tiles side by side, then the next column tile
  const int tiles_m = M / BM, tiles_n = N / BN, per_group = GROUP_M * tiles_n;
  const int first_m = (blockIdx.x / per_group) * GROUP_M, rows_here = min(tiles_m - first_m, GROUP_M);
  const int in_group = blockIdx.x % per_group;
  const int m0 = (first_m + in_group % rows_here) * BM, n0 = (in_group / rows_here) * BN;
  const int tiles = K / BK;

  if (threadIdx.x == 0) {
    for (int i = 0; i < T::STAGES; ++i) {
      mbar_init(&s.full[i], 1);
      mbar_init(&s.empty[i], CONSUMERS);
    }
    mbar_fence_init();
  }
  __syncthreads();

  if (group == 0) {  // the producer
    setmaxnreg_dec<24>();
    if (t128 == 0) {
      for (int t = 0; t < tiles; ++t) {
        const int st = t % T::STAGES;
        if (t >= T::STAGES) mbar_wait(&s.empty[st], ((t / T::STAGES) - 1) & 1);
        mbar_arrive_expect_tx(&s.full[st], T::STAGE_BYTES);
        tma_load_2d(s.a[st], &map_a, &s.full[st], t * BK, m0);
        for (int col = 0; col < BN; col += 64)  // B: BK rows × 64 columns per box
          tma_load_2d(s.b[st] + col * BK, &map_b, &s.full[st], n0 + col, t * BK);
      }
    }
    return;
  }

  setmaxnreg_inc<240>();
  float d[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) d[i] = 0.0f;
  const int row0 = (group - 1) * 64;  // this warpgroup's rows of the tile
  for (int t = 0; t < tiles; ++t) {
    const int st = t % T::STAGES;
    mbar_wait(&s.full[st], (t / T::STAGES) & 1);
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < BK / 16; ++k) {
      const uint64_t da = desc_k_major_sw128(&s.a[st][row0 * BK + k * 16]);
      const uint64_t db = desc_mn_major_sw128(&s.b[st][k * 16 * 64], 64 * BK * 2);
      if constexpr (BN == 256)
        wgmma_m64n256k16_bf16<1>(d, da, db, 1);
      else
        wgmma_m64n128k16_bf16<1>(d, da, db, 1);
    }
    wgmma_commit();
    wgmma_wait<1>();  // the previous k-tile's products are done: its buffer may be refilled
    if (t > 0 && t128 == 0) mbar_arrive(&s.empty[(t - 1) % T::STAGES]);
  }
  wgmma_wait<0>();

  const int warp = t128 / 32, lane = t128 % 32;
  const int row = m0 + row0 + warp * 16 + lane / 4;
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    const int col = n0 + 8 * j + 2 * (lane % 4);
    *reinterpret_cast<__nv_bfloat162*>(&c[size_t(row) * N + col]) = __floats2bfloat162_rn(d[4 * j], d[4 * j + 1]);
    *reinterpret_cast<__nv_bfloat162*>(&c[size_t(row + 8) * N + col]) =
        __floats2bfloat162_rn(d[4 * j + 2], d[4 * j + 3]);
  }
#else
  __trap();  // built for another GPU: the launcher refuses before this runs
#endif
}

// a row-major rows×cols bf16 matrix, read in boxes of box_rows × 64 columns with 128 B swizzling
bool tile_map(CUtensorMap* map, const void* base, uint64_t rows, uint64_t cols, uint32_t box_rows) {
  const cuuint64_t dims[2] = {cols, rows};
  const cuuint64_t strides[1] = {cols * sizeof(__nv_bfloat16)};
  const cuuint32_t box[2] = {64, box_rows};
  return tensor_map_16bit(map, base, 2, dims, strides, box, false);
}

template <int BN>
cudaError_t launch(const void* a, const void* b, void* c, int M, int N, int K, cudaStream_t stream) {
  CUtensorMap map_a, map_b;
  if (!tile_map(&map_a, a, M, K, BM) || !tile_map(&map_b, b, K, N, BK)) return cudaErrorInvalidValue;
  auto kernel = matmul_wgmma_kernel<BN>;
  const cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Tile<BN>::SHARED_BYTES);
  if (err != cudaSuccess) return err;
  kernel<<<(M / BM) * (N / BN), THREADS, Tile<BN>::SHARED_BYTES, stream>>>(
      map_a, map_b, static_cast<__nv_bfloat16*>(c), M, N, K);
  return cudaGetLastError();
}

}  // namespace

const char* matmul_wgmma_not_here() { return not_on_hopper(); }

const char* matmul_wgmma_unsupported(int M, int N, int K, int bn) {
  if (bn != 128 && bn != 256) return "matmul-wgmma's tile width must be 128 or 256";
  if (M <= 0 || N <= 0 || K <= 0 || M % BM || N % bn || K % BK)
    return bn == 256 ? "matmul-wgmma needs M a multiple of 128, N of 256 and K of 64"
                     : "matmul-wgmma needs M a multiple of 128, N of 128 and K of 64";
  return nullptr;
}

cudaError_t matmul_wgmma_launch(const void* a, const void* b, void* c, int M, int N, int K, int bn,
                                cudaStream_t stream) {
  if (matmul_wgmma_not_here() || matmul_wgmma_unsupported(M, N, K, bn)) return cudaErrorNotSupported;
  return bn == 256 ? launch<256>(a, b, c, M, N, K, stream) : launch<128>(a, b, c, M, N, K, stream);
}
