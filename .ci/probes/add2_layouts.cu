// Probe: candidate add2 layouts, timed from Python through ctypes against torch's add and a copy
// (not part of the package; `python3 .ci/probes/add2_layouts.py` on the GPU machine). Variants:
// 0 grid-stride float4 x4 (add2-vec4), 1-5/8/9 one tile per block (threads, float4 per thread,
// streaming cache hints), 6/7 persistent blocks over tiles. 4 became add2-tile.
#include <cuda_runtime.h>
#include <cstdint>

__device__ __forceinline__ float4 add4(float4 x, float4 y) { return make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w); }

// 0: current shipped vec4 (grid-stride, unroll 4 strided by the grid)
template <int U>
__global__ void gridstride(const float4* __restrict__ a, const float4* __restrict__ b, float4* __restrict__ c, long long n4) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + (U - 1) * stride < n4; i += U * stride) {
    float4 x[U], y[U];
#pragma unroll
    for (int u = 0; u < U; ++u) { x[u] = a[i + u * stride]; y[u] = b[i + u * stride]; }
#pragma unroll
    for (int u = 0; u < U; ++u) c[i + u * stride] = add4(x[u], y[u]);
  }
  for (; i < n4; i += stride) c[i] = add4(a[i], b[i]);
}

template <bool STREAM>
__device__ __forceinline__ float4 ld(const float4* p) { if constexpr (STREAM) return __ldcs(p); else return *p; }
template <bool STREAM>
__device__ __forceinline__ void st(float4* p, float4 v) { if constexpr (STREAM) __stcs(p, v); else *p = v; }

// one contiguous tile of blockDim*U float4 starting at tile index t
template <int U, bool STREAM>
__device__ __forceinline__ void tile_body(const float4* __restrict__ a, const float4* __restrict__ b, float4* __restrict__ c,
                                          long long n4, long long t) {
  const long long base = t * blockDim.x * U + threadIdx.x;
  if (base + (long long)(U - 1) * blockDim.x < n4) {
    float4 x[U], y[U];
#pragma unroll
    for (int u = 0; u < U; ++u) { x[u] = ld<STREAM>(a + base + u * blockDim.x); y[u] = ld<STREAM>(b + base + u * blockDim.x); }
#pragma unroll
    for (int u = 0; u < U; ++u) st<STREAM>(c + base + u * blockDim.x, add4(x[u], y[u]));
  } else {
    for (int u = 0; u < U; ++u) { long long i = base + u * blockDim.x; if (i < n4) c[i] = add4(a[i], b[i]); }
  }
}

// 1/2...: one tile per block, one pass (no grid stride)
template <int U, bool STREAM>
__global__ void tile(const float4* __restrict__ a, const float4* __restrict__ b, float4* __restrict__ c, long long n4) {
  tile_body<U, STREAM>(a, b, c, n4, blockIdx.x);
}

// 6/7: persistent blocks walking contiguous tiles (tile = blockIdx + k*gridDim)
template <int U, bool STREAM>
__global__ void tiles_persistent(const float4* __restrict__ a, const float4* __restrict__ b, float4* __restrict__ c, long long n4) {
  for (long long t = blockIdx.x; t * blockDim.x * U < n4; t += gridDim.x) tile_body<U, STREAM>(a, b, c, n4, t);
}

extern "C" int launch(int v, std::uintptr_t pa, std::uintptr_t pb, std::uintptr_t pc, long long n, std::uintptr_t s) {
  auto a = (const float4*)pa; auto b = (const float4*)pb; auto c = (float4*)pc; auto st_ = (cudaStream_t)s;
  long long n4 = n / 4; int sms = 132;
  auto tiles = [&](int thr, int U) { return (unsigned)((n4 + (long long)thr * U - 1) / ((long long)thr * U)); };
  switch (v) {
    case 0: gridstride<4><<<sms * 4, 512, 0, st_>>>(a, b, c, n4); break;
    case 1: tile<4, false><<<tiles(256, 4), 256, 0, st_>>>(a, b, c, n4); break;
    case 2: tile<4, true><<<tiles(256, 4), 256, 0, st_>>>(a, b, c, n4); break;
    case 3: tile<2, false><<<tiles(256, 2), 256, 0, st_>>>(a, b, c, n4); break;
    case 4: tile<1, false><<<tiles(128, 1), 128, 0, st_>>>(a, b, c, n4); break;
    case 5: tile<8, true><<<tiles(128, 8), 128, 0, st_>>>(a, b, c, n4); break;
    case 6: tiles_persistent<4, true><<<sms * 8, 256, 0, st_>>>(a, b, c, n4); break;
    case 7: tiles_persistent<4, false><<<sms * 8, 256, 0, st_>>>(a, b, c, n4); break;
    case 8: tile<2, true><<<tiles(256, 2), 256, 0, st_>>>(a, b, c, n4); break;
    case 9: tile<4, false><<<tiles(128, 4), 128, 0, st_>>>(a, b, c, n4); break;
    default: return -1;
  }
  return (int)cudaGetLastError();
}
