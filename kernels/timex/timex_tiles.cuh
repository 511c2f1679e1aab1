// What timex-wgmma's kernels (timex_wgmma.cu, timex_wgmma_gw.cu) share: the tiles they take by TMA.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "cudabench/hopper.cuh"

namespace timex_tiles {

constexpr int TILE = 64;       // t per tile
constexpr int ROWS = 32;       // batch rows per tile (a wgmma's N, or its K in gw)
constexpr int MAX_TILES = 12;  // T <= 768

template <typename S>
__device__ __forceinline__ S from_f(float x) {
  if constexpr (std::is_same<S, __half>::value) return __float2half_rn(x);
  else return __float2bfloat16_rn(x);
}

// A TMA map over x (B, C, T), 16-bit: boxes of ROWS batch rows × TILE steps of one channel, 128-byte swizzled
// in shared memory, zeros past B and past T.
inline bool row_tiles_map(CUtensorMap* map, const void* x, int B, int C, int T, bool f16) {
  const cuuint64_t dims[3] = {(cuuint64_t)T, (cuuint64_t)C, (cuuint64_t)B};
  const cuuint64_t strides[2] = {(cuuint64_t)T * 2, (cuuint64_t)C * T * 2};
  const cuuint32_t box[3] = {TILE, 1, ROWS};
  return cudabench::hopper::tensor_map_16bit(map, x, 3, dims, strides, box, f16);
}

}  // namespace timex_tiles
