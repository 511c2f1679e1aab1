// The TimeX ladder, forward and backward. Notation used throughout:
//   ww[j] = w[c, T-1-j]  (w reversed), so out[t] = eps + sum_{j=0..t} ww[j] k[t-j];
//   gk is the same causal convolution run on g reversed in time;
//   gw[c, T-1-j] = sum_b sum_{v=0..T-1-j} g[b,c,v+j] k[b,c,v]  (a correlation at lag j).
#include "timex.h"

namespace {

// ---------------------------------------------------------------------------------------------
// v1: one thread per output, operands read from global memory.

__global__ void fwd_v1(const float* __restrict__ w, const float* __restrict__ k,
                       float* __restrict__ out, float eps, int C, int T) {
  const size_t row = blockIdx.x;  // b*C + c
  const float* wr = w + (row % C) * T;
  const float* kr = k + row * T;
  for (int t = threadIdx.x; t < T; t += blockDim.x) {
    float s = 0.0f;
    for (int u = 0; u <= t; ++u) s += wr[T - 1 - t + u] * kr[u];
    out[row * T + t] = eps + s;
  }
}

__global__ void bwd_gk_v1(const float* __restrict__ w, const float* __restrict__ g,
                          float* __restrict__ gk, int C, int T) {
  const size_t row = blockIdx.x;
  const float* wr = w + (row % C) * T;
  const float* gr = g + row * T;
  for (int t = threadIdx.x; t < T; t += blockDim.x) {
    float s = 0.0f;
    for (int v = t; v < T; ++v) s += gr[v] * wr[T - 1 - (v - t)];
    gk[row * T + t] = s;
  }
}

__global__ void bwd_gw_v1(const float* __restrict__ g, const float* __restrict__ k,
                          float* __restrict__ gw, int B, int C, int T) {
  const int c = blockIdx.x;
  for (int j = threadIdx.x; j < T; j += blockDim.x) {
    float s = 0.0f;
    for (int b = 0; b < B; ++b) {
      const size_t row = (size_t)b * C + c;
      for (int u = 0; u <= j; ++u) s += g[row * T + T - 1 - j + u] * k[row * T + u];
    }
    gw[(size_t)c * T + j] = s;
  }
}

// ---------------------------------------------------------------------------------------------
// v2: the block stages its w row (reversed) and its k row in shared memory; one thread per output.

__global__ void fwd_v2(const float* __restrict__ w, const float* __restrict__ k,
                       float* __restrict__ out, float eps, int C, int T) {
  extern __shared__ float smem[];
  float* sww = smem;
  float* sk = smem + T;
  const size_t row = blockIdx.x;
  const float* wr = w + (row % C) * T;
  const float* kr = k + row * T;
  for (int i = threadIdx.x; i < T; i += blockDim.x) {
    sww[i] = wr[T - 1 - i];
    sk[i] = kr[i];
  }
  __syncthreads();
  const int t = threadIdx.x;  // blockDim.x == T
  float s = 0.0f;
  for (int u = 0; u <= t; ++u) s += sww[t - u] * sk[u];
  out[row * T + t] = eps + s;
}

// Thread x computes gk at t = T-1-x (x+1 terms) and this row's gw term at lag x (T-x terms):
// every thread does T+1 steps.
__global__ void bwd_v2(const float* __restrict__ w, const float* __restrict__ k,
                       const float* __restrict__ g, float* __restrict__ gk,
                       float* __restrict__ gw_part, int C, int T) {
  extern __shared__ float smem[];
  float* sww = smem;
  float* sg = smem + T;
  float* sk = smem + 2 * T;
  const size_t row = blockIdx.x;
  const float* wr = w + (row % C) * T;
  for (int i = threadIdx.x; i < T; i += blockDim.x) {
    sww[i] = wr[T - 1 - i];
    sg[i] = g[row * T + i];
    sk[i] = k[row * T + i];
  }
  __syncthreads();
  const int x = threadIdx.x;
  float s = 0.0f;
  for (int i = 0; i <= x; ++i) s += sww[i] * sg[T - 1 - x + i];
  gk[row * T + T - 1 - x] = s;
  float r = 0.0f;
  for (int v = 0; v < T - x; ++v) r += sg[v + x] * sk[v];
  gw_part[row * T + T - 1 - x] = r;
}

// ---------------------------------------------------------------------------------------------
// v3 and v4: each thread owns four consecutive outputs and moves float4s. In the inner step a
// thread multiplies a 4-wide block of k (the same for every thread: a shared-memory broadcast)
// with seven consecutive ww values held in two float4 registers, one of them carried over from
// the previous step. ww is staged with four leading zeros so terms with u > t vanish.

// acc[i] += ww[base + i - d] * kv[d] for i, d in 0..3, where lo = ww[base-4 .. base-1] and
// hi = ww[base .. base+3].
__device__ __forceinline__ void causal_block(float acc[4], float4 lo, float4 hi, float4 kq) {
  const float wv[7] = {lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};  // wv[p + 3] = ww[base + p]
  const float kv[4] = {kq.x, kq.y, kq.z, kq.w};
#pragma unroll
  for (int d = 0; d < 4; ++d) {
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[i] += wv[i - d + 3] * kv[d];
  }
}

// acc[i] += gv[i + d] * kv[d] for i, d in 0..3, where g0, g1 hold g[4n .. 4n+7]: one step of the
// gw correlation.
__device__ __forceinline__ void lag_block(float acc[4], float4 g0, float4 g1, float4 kq) {
  const float gv[8] = {g0.x, g0.y, g0.z, g0.w, g1.x, g1.y, g1.z, g1.w};
  const float kv[4] = {kq.x, kq.y, kq.z, kq.w};
#pragma unroll
  for (int d = 0; d < 4; ++d) {
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[i] += gv[i + d] * kv[d];
  }
}

__device__ __forceinline__ float4 reversed(float4 v) { return make_float4(v.w, v.z, v.y, v.x); }

// sww4[0] = 0, sww4[1 + j/4] = ww[j .. j+3].
__device__ __forceinline__ void stage_reversed_w(float* sww, const float* wr, int T) {
  for (int i = threadIdx.x; i < T; i += blockDim.x) sww[4 + i] = wr[T - 1 - i];
  for (int i = threadIdx.x; i < 4; i += blockDim.x) sww[i] = 0.0f;
}

__device__ __forceinline__ void stage_row(float4* dst, const float* src, int Q) {
  const float4* src4 = reinterpret_cast<const float4*>(src);
  for (int i = threadIdx.x; i < Q; i += blockDim.x) dst[i] = src4[i];
}

// Outputs t = 4q .. 4q+3 of R rows: q+1 steps over k[4m .. 4m+3] (the causal triangle).
template <int R>
__device__ __forceinline__ void causal_outputs(const float4* sww4, const float4* sk4, int Q, int q, float acc[R][4]) {
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = acc[r][2] = acc[r][3] = 0.0f;
  float4 hi = sww4[q + 1];
#pragma unroll 4  // fewer loop and register-move instructions per FMA (measured: ~6% at v4)
  for (int m = 0; m <= q; ++m) {
    const float4 lo = sww4[q - m];
#pragma unroll
    for (int r = 0; r < R; ++r) causal_block(acc[r], lo, hi, sk4[r * Q + m]);
    hi = lo;
  }
}

template <int R>
__device__ __forceinline__ void store_outputs(float* out, int C, int c, int b0, int T, int q, float eps,
                                              const float acc[R][4]) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    float4* o4 = reinterpret_cast<float4*>(out + ((size_t)(b0 + r) * C + c) * T);
    o4[q] = make_float4(eps + acc[r][0], eps + acc[r][1], eps + acc[r][2], eps + acc[r][3]);
  }
}

// Forward for R batch rows per block (v3: R = 1; v4, v5: R = TIMEX_BF). Block = (channel, row
// group). BALANCED (v5): Q/2 threads, thread x computes q = x and q = Q-1-x, so every thread
// runs Q+1 steps; otherwise (v3, v4) Q threads and thread q runs q+1 steps.
template <int R, bool BALANCED>
__global__ void __launch_bounds__(TIMEX_TMAX / 4)
fwd_vec(const float* __restrict__ w, const float* __restrict__ k, float* __restrict__ out,
        float eps, int C, int T) {
  extern __shared__ float4 smem4[];
  const int Q = T / 4;
  float4* sww4 = smem4;         // Q + 1
  float4* sk4 = smem4 + Q + 1;  // R * Q
  const int c = blockIdx.x % C;
  const int b0 = (blockIdx.x / C) * R;
  stage_reversed_w(reinterpret_cast<float*>(sww4), w + (size_t)c * T, T);
#pragma unroll
  for (int r = 0; r < R; ++r) stage_row(sk4 + r * Q, k + ((size_t)(b0 + r) * C + c) * T, Q);
  __syncthreads();

  float acc[R][4];
  const int x = threadIdx.x;
  causal_outputs<R>(sww4, sk4, Q, x, acc);
  store_outputs<R>(out, C, c, b0, T, x, eps, acc);
  if (BALANCED) {
    causal_outputs<R>(sww4, sk4, Q, Q - 1 - x, acc);
    store_outputs<R>(out, C, c, b0, T, Q - 1 - x, eps, acc);
  }
}

// Backward for R batch rows per block (v3: R = 1; v4: R = TIMEX_BB; v5: R = TIMEX_BB5). Thread q computes
// gk at t = T-1-(4q..4q+3) (q+1 steps: the forward recurrence on g reversed) and the block's
// gw terms at lags 4q..4q+3 (Q-q steps), summed over its R rows into gw_part[blockIdx / C].
template <int R>
__global__ void __launch_bounds__(TIMEX_TMAX / 4)
bwd_vec(const float* __restrict__ w, const float* __restrict__ k, const float* __restrict__ g,
        float* __restrict__ gk, float* __restrict__ gw_part, int C, int T) {
  extern __shared__ float4 smem4[];
  const int Q = T / 4;
  float4* sww4 = smem4;                   // Q + 1 (leading zeros)
  float4* sg4 = smem4 + Q + 1;            // R * (Q + 1) (trailing zeros)
  float4* sk4 = sg4 + R * (Q + 1);        // R * Q
  const int c = blockIdx.x % C;
  const int group = blockIdx.x / C;
  const int b0 = group * R;
  stage_reversed_w(reinterpret_cast<float*>(sww4), w + (size_t)c * T, T);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const size_t row = (size_t)(b0 + r) * C + c;
    stage_row(sg4 + r * (Q + 1), g + row * T, Q);
    stage_row(sk4 + r * Q, k + row * T, Q);
    if (threadIdx.x == 0) sg4[r * (Q + 1) + Q] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  __syncthreads();

  const int q = threadIdx.x;
  float agk[R][4] = {};
  float4 hi = sww4[q + 1];
#pragma unroll 4
  for (int m = 0; m <= q; ++m) {  // g reversed, 4m .. 4m+3, is g[T-1-4m .. T-4-4m]
    const float4 lo = sww4[q - m];
#pragma unroll
    for (int r = 0; r < R; ++r) causal_block(agk[r], lo, hi, reversed(sg4[r * (Q + 1) + Q - 1 - m]));
    hi = lo;
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    float4* gk4 = reinterpret_cast<float4*>(gk + ((size_t)(b0 + r) * C + c) * T);
    gk4[Q - 1 - q] = make_float4(agk[r][3], agk[r][2], agk[r][1], agk[r][0]);
  }

  float agw[4] = {};
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float4* sg = sg4 + r * (Q + 1);
    float4 g0 = sg[q];
#pragma unroll 4
    for (int m = 0; m < Q - q; ++m) {  // k[4m .. 4m+3] against g[4(q+m) .. 4(q+m)+7]
      const float4 g1 = sg[q + m + 1];
      lag_block(agw, g0, g1, sk4[r * Q + m]);
      g0 = g1;
    }
  }
  float4* p4 = reinterpret_cast<float4*>(gw_part + ((size_t)group * C + c) * T);
  p4[Q - 1 - q] = make_float4(agw[3], agw[2], agw[1], agw[0]);
}

// gw[i] = sum_p part[p, i] over P partial sums of C*T values.
__global__ void sum_partials(const float* __restrict__ part, float* __restrict__ gw, int P, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    float s = 0.0f;
    for (int p = 0; p < P; ++p) s += part[(size_t)p * n + i];
    gw[i] = s;
  }
}

int simple_threads(int T) { return T < 256 ? ((T + 31) / 32) * 32 : 256; }

int rows_per_block(int version, bool backward) {
  if (version == 4) return backward ? TIMEX_BB : TIMEX_BF;
  if (version == 5) return backward ? TIMEX_BB5 : TIMEX_BF;
  return 1;
}

size_t vec_smem_bytes(int T, int R, bool backward) {
  const size_t Q = T / 4;
  const size_t float4s = backward ? (Q + 1) + R * (Q + 1) + R * Q : (Q + 1) + R * Q;
  return float4s * sizeof(float4);
}

}  // namespace

const char* timex_unsupported(int version, int B, int C, int T, bool backward) {
  if (version < 1 || version > 8) return "unknown TimeX version (1..8)";
  if (B <= 0 || C <= 0 || T <= 0) return "B, C and T must be positive";
  if (version == 8) {  // timex-wgmma: its own limits, then timex-mma's (B)
    const char* why = timex_wgmma_unsupported(B, C, T);
    if (why != nullptr) return why;
  }
  if (version >= 7) {  // timex-mma: any C; B up to the grid's y dimension in groups of 16
    if (B > 65535 * 16) return "B must be at most 1048560 (the grid's y dimension holds groups of 16 rows)";
    return T > TIMEX_MMA_TMAX ? "T must be at most 2048 (32 rows of k staged in one block's shared memory)" : nullptr;
  }
  if (version == 6) {  // timex-fft: any B and C
    return T > TIMEX_FFT_TMAX ? "T must be at most 16384 (one row's transform in one block's shared memory)"
                              : nullptr;
  }
  if (version >= 2 && T > TIMEX_TMAX) return "T must be at most 1024 (one row per thread block)";
  if (version >= 3 && T % 4 != 0) return "T must be a multiple of 4 (float4 loads and stores)";
  if (version == 5 && T % 8 != 0) return "T must be a multiple of 8 (v5 pairs output quads q and T/4-1-q)";
  const int R = rows_per_block(version, backward);
  if (B % R != 0) return backward ? "B must be a multiple of the backward's batch rows per block (v4: 2, v5: 4)"
                                  : "B must be a multiple of 8 (v4, v5 forward: 8 batch rows per block)";
  return nullptr;
}

size_t timex_forward_scratch(int version, int B, int C, int T) {
  return version == 6 ? timex_fft_scratch(B, C, T, false) : 0;  // timex-mma (7), timex-wgmma (8): none
}

cudaError_t timex_forward(int version, const float* w, const float* k, float* out, float eps, float* scratch,
                          int B, int C, int T, cudaStream_t stream) {
  if (timex_unsupported(version, B, C, T, false)) return cudaErrorInvalidValue;
  if (version == 6) return timex_fft_forward(TIMEX_F32, w, k, out, eps, scratch, B, C, T, stream);
  if (version >= 7) return cudaErrorInvalidValue;  // timex-mma, timex-wgmma: bfloat16 and float16 only
  const unsigned rows = (unsigned)B * C;
  switch (version) {
    case 1:
      fwd_v1<<<rows, simple_threads(T), 0, stream>>>(w, k, out, eps, C, T);
      break;
    case 2:
      fwd_v2<<<rows, T, 2 * T * sizeof(float), stream>>>(w, k, out, eps, C, T);
      break;
    case 3:
      fwd_vec<1, false><<<rows, T / 4, vec_smem_bytes(T, 1, false), stream>>>(w, k, out, eps, C, T);
      break;
    case 4:
      fwd_vec<TIMEX_BF, false><<<rows / TIMEX_BF, T / 4, vec_smem_bytes(T, TIMEX_BF, false), stream>>>(
          w, k, out, eps, C, T);
      break;
    case 5:
      fwd_vec<TIMEX_BF, true><<<rows / TIMEX_BF, T / 8, vec_smem_bytes(T, TIMEX_BF, false), stream>>>(
          w, k, out, eps, C, T);
      break;
  }
  return cudaGetLastError();
}

size_t timex_backward_scratch(int version, int B, int C, int T) {
  if (version == 6) return timex_fft_scratch(B, C, T, true);
  if (version == 8) return 0;  // timex-wgmma: a block per channel sums its gw
  if (version == 7) return timex_mma_scratch(B, C, T, true);
  if (version == 1) return 0;
  return (size_t)(B / rows_per_block(version, true)) * C * T;
}

cudaError_t timex_backward(int version, const float* w, const float* k, const float* g, float* gw,
                           float* gk, float* scratch, int B, int C, int T, cudaStream_t stream) {
  if (timex_unsupported(version, B, C, T, true)) return cudaErrorInvalidValue;
  if (version == 6) return timex_fft_backward(TIMEX_F32, w, k, g, gw, gk, scratch, B, C, T, stream);
  if (version >= 7) return cudaErrorInvalidValue;  // timex-mma, timex-wgmma: bfloat16 and float16 only
  const unsigned rows = (unsigned)B * C;
  const int R = rows_per_block(version, true);
  switch (version) {
    case 1:
      bwd_gk_v1<<<rows, simple_threads(T), 0, stream>>>(w, g, gk, C, T);
      bwd_gw_v1<<<C, simple_threads(T), 0, stream>>>(g, k, gw, B, C, T);
      return cudaGetLastError();
    case 2:
      bwd_v2<<<rows, T, 3 * T * sizeof(float), stream>>>(w, k, g, gk, scratch, C, T);
      break;
    case 3:
      bwd_vec<1><<<rows, T / 4, vec_smem_bytes(T, 1, true), stream>>>(w, k, g, gk, scratch, C, T);
      break;
    case 4:
      bwd_vec<TIMEX_BB><<<rows / TIMEX_BB, T / 4, vec_smem_bytes(T, TIMEX_BB, true), stream>>>(
          w, k, g, gk, scratch, C, T);
      break;
    case 5:
      bwd_vec<TIMEX_BB5><<<rows / TIMEX_BB5, T / 4, vec_smem_bytes(T, TIMEX_BB5, true), stream>>>(
          w, k, g, gk, scratch, C, T);
      break;
  }
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  return timex_sum_partials(scratch, gw, B / R, (size_t)C * T, stream);
}

cudaError_t timex_sum_partials(const float* part, float* gw, int P, size_t n, cudaStream_t stream) {
  const int blocks = (int)((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096);
  sum_partials<<<blocks, 256, 0, stream>>>(part, gw, P, n);
  return cudaGetLastError();
}
