// timex-mma (version 7): TimeX on tensor cores, bfloat16 or float16 in and out, float32 sums.
//
// Per channel c the convolution is a product with a Toeplitz matrix. For a group of 32 batch rows:
//   forward  OUT (rows x T) = K (rows x T) . Wf,  Wf[u, t] = w[c, T-1-t+u]  (zero when u > t)
//   gk       GK  (rows x T) = G (rows x T) . Wb,  Wb[s, t] = w[c, T-1-s+t]  (zero when s < t)
// Both run on mma.sync m16n8k16: the rows (K or G) are staged in shared memory, and each B-operand
// register (two consecutive k of one column) is read whole from a table of packed neighbour pairs of
// w, zero outside 0..T-1, which also supplies the causal mask.
//   gw[c, T-1-d] = sum_b sum_u g[b, u+d] k[b, u] = sum_u P[u+d, u],  P = G^T K over the batch rows.
// P's 16x8 tiles along one diagonal band (s0 + 16m, 16m) share d = s - u per accumulator element, so
// a band sums into one set of accumulators, folded into gw's lags at the band's end.
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>

#include "cudabench/tensor_core.cuh"
#include "fft_math.cuh"

namespace {

using timex_fft::from_float;
using timex_fft::to_float;
using timex_fft::with_storage;
using tensor_core::ldmatrix_x4;
using tensor_core::mma;
using tensor_core::pack2;

constexpr int ROWS = 32;      // forward / gk: batch rows per block, two m16 tiles
constexpr int GW_ROWS = 16;   // gw: batch rows per block, one k16 step
constexpr int WARPS = 8;
constexpr int THREADS = WARPS * 32;
constexpr int ROW_PAD = 8;    // elements added to each staged row, so 8 rows fall in distinct banks
constexpr int TAB_LO = 64;    // the pair tables cover w indices -TAB_LO .. T + TAB_LO - 1

__host__ __device__ inline int padded32(int T) { return (T + 31) / 32 * 32; }
// Entries of a pair table, rounded up so that the rows staged after it start 16-byte aligned.
__host__ __device__ inline int table_entries(int T) { return (T + 2 * TAB_LO + 3) / 4 * 4; }

// rows x[b0 + r, c, 0..T-1] (r < n) into xs[r * stride + t], zero past B and past T up to Tp; with
// 16-byte loads when every row starts 16-byte aligned (x aligned and T % 8 == 0; a view may not be).
template <typename S>
__device__ void stage_rows(const S* __restrict__ x, S* xs, int n, int b0, int B, int C, int T, int Tp, int stride) {
  const int c = blockIdx.x;
  if (T % 8 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0) {
    const int chunks = Tp / 8;
    for (int i = threadIdx.x; i < n * chunks; i += blockDim.x) {
      const int r = i / chunks, t = (i - r * chunks) * 8, b = b0 + r;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (b < B && t < T) v = *reinterpret_cast<const uint4*>(x + ((size_t)b * C + c) * T + t);
      *reinterpret_cast<uint4*>(xs + r * stride + t) = v;
    }
  } else {
    const S zero = from_float<S>(0.f);
    for (int i = threadIdx.x; i < n * Tp; i += blockDim.x) {
      const int r = i / Tp, t = i - r * Tp, b = b0 + r;
      xs[r * stride + t] = b < B && t < T ? x[((size_t)b * C + c) * T + t] : zero;
    }
  }
}

// The r-th group of work a warp takes when the groups' costs rise (or fall) with their index: snake
// order, so the warps' totals are close.
__device__ __forceinline__ int snake(int r, int warp) { return r * WARPS + ((r & 1) ? WARPS - 1 - warp : warp); }

size_t toeplitz_smem(int T) {
  return (size_t)table_entries(T) * sizeof(uint32_t) + (size_t)ROWS * (padded32(T) + ROW_PAD) * 2;
}

size_t gw_smem(int T) {
  return 2 * (size_t)GW_ROWS * (padded32(T) + ROW_PAD) * 2 + (size_t)padded32(T) * sizeof(float);
}

// forward (BACK false): out = eps + K . Wf;  gk (BACK true): gk = G . Wb.  Grid (C, ceil(B / ROWS)).
template <typename S, bool BACK>
__global__ void __launch_bounds__(THREADS) toeplitz_mma(const S* __restrict__ w, const S* __restrict__ x,
                                                        S* __restrict__ y, float eps, int B, int C, int T) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int Tp = padded32(T), stride = Tp + ROW_PAD;
  uint32_t* tab = reinterpret_cast<uint32_t*>(smem);  // tab[i + TAB_LO] = (w[i], w[i +- 1])
  S* xs = reinterpret_cast<S*>(tab + table_entries(T));  // xs[r * stride + t] = x[b0 + r, c, t]
  const int c = blockIdx.x, b0 = blockIdx.y * ROWS;
  const S zero = from_float<S>(0.f);
  const S* wc = w + (size_t)c * T;
  for (int i = threadIdx.x; i < T + 2 * TAB_LO; i += THREADS) {
    const int j = i - TAB_LO, j2 = BACK ? j - 1 : j + 1;
    tab[i] = pack2<S>(j >= 0 && j < T ? wc[j] : zero, j2 >= 0 && j2 < T ? wc[j2] : zero);
  }
  stage_rows(x, xs, ROWS, b0, B, C, T, Tp, stride);
  __syncthreads();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, q = lane % 4, r8 = lane / 4;
  for (int round = 0;; ++round) {
    const int group = snake(round, warp);  // 32 outputs t = n0 .. n0 + 31
    if (group >= Tp / 32) break;
    const int n0 = group * 32;
    float acc[2][4][4] = {};
    const int k_begin = BACK ? n0 : 0, k_end = BACK ? Tp : n0 + 32;
    for (int k0 = k_begin; k0 < k_end; k0 += 16) {
      const int kb = k0 + 2 * q;
      uint32_t a[2][4];
      for (int m = 0; m < 2; ++m) ldmatrix_x4<false>(a[m], xs + (m * 16 + lane % 16) * stride + k0 + lane / 16 * 8);
      for (int n = 0; n < 4; ++n) {
        const int t = n0 + n * 8 + r8;
        const int i = BACK ? T - 1 - kb + t : T - 1 - t + kb;  // w index of (k = kb, column t)
        const uint32_t lo = tab[i + TAB_LO], hi = tab[i + TAB_LO + (BACK ? -8 : 8)];
        mma<S>(acc[0][n], a[0], lo, hi);
        mma<S>(acc[1][n], a[1], lo, hi);
      }
    }
    const float add = BACK ? 0.f : eps;
    const bool pairs = T % 2 == 0 && reinterpret_cast<uintptr_t>(y) % 4 == 0;
    for (int m = 0; m < 2; ++m) {
      for (int n = 0; n < 4; ++n) {
        for (int h = 0; h < 2; ++h) {  // accumulators (2h, 2h + 1): row r8 + 8h, columns t and t + 1
          const int b = b0 + m * 16 + r8 + 8 * h, t = n0 + n * 8 + 2 * q;
          if (b >= B || t >= T) continue;
          S* at = y + ((size_t)b * C + c) * T + t;
          const S lo = from_float<S>(acc[m][n][2 * h] + add), hi = from_float<S>(acc[m][n][2 * h + 1] + add);
          if (pairs) {  // t even: t + 1 < T, and 4-byte aligned
            *reinterpret_cast<uint32_t*>(at) = pack2<S>(lo, hi);
          } else {
            at[0] = lo;
            if (t + 1 < T) at[1] = hi;
          }
        }
      }
    }
  }
}

// gw partial sums over GW_ROWS batch rows: part[(blockIdx.y * C + c) * T + j]. Grid (C, ceil(B / GW_ROWS)).
// G and K are staged as rows; P = G^T K takes both operands through ldmatrix.trans (k = b runs down
// the stored rows).
template <typename S>
__global__ void __launch_bounds__(THREADS) gw_mma(const S* __restrict__ k, const S* __restrict__ g,
                                                  float* __restrict__ part, int B, int C, int T) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int Tp = padded32(T), stride = Tp + ROW_PAD;
  S* gs = reinterpret_cast<S*>(smem);  // gs[r * stride + s] = g[b0 + r, c, s]
  S* ks = gs + GW_ROWS * stride;       // ks[r * stride + u] = k[b0 + r, c, u]
  float* lags = reinterpret_cast<float*>(ks + GW_ROWS * stride);  // lags[d] = sum_u P[u + d, u]
  const int c = blockIdx.x, b0 = blockIdx.y * GW_ROWS;
  stage_rows(g, gs, GW_ROWS, b0, B, C, T, Tp, stride);
  stage_rows(k, ks, GW_ROWS, b0, B, C, T, Tp, stride);
  for (int d = threadIdx.x; d < Tp; d += THREADS) lags[d] = 0.f;
  __syncthreads();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, q = lane % 4, r8 = lane / 4;
  const int mat = lane / 8, row8 = lane % 8;  // the ldmatrix row this lane addresses
  for (int round = 0;; ++round) {
    const int band = snake(round, warp);
    if (band >= Tp / 16) break;
    const int d0 = band * 16;  // tiles (s0, u0) = (d0 + 16m, 16m)
    float acc[2][4] = {};
    for (int u0 = 0; d0 + u0 < Tp; u0 += 16) {
      uint32_t a[4], b[4];  // a: A[s][b] = g[b][s], matrices (b 0-7 | 8-15) x (s0 | s0 + 8), s fastest
      ldmatrix_x4<true>(a, gs + ((mat >> 1) * 8 + row8) * stride + d0 + u0 + (mat & 1) * 8);
      // b: B[b][u] = k[b][u], matrices (b 0-7 | 8-15) x (u0 | u0 + 8), b fastest
      ldmatrix_x4<true>(b, ks + ((mat & 1) * 8 + row8) * stride + u0 + (mat >> 1) * 8);
      mma<S>(acc[0], a, b[0], b[1]);
      mma<S>(acc[1], a, b[2], b[3]);
    }
    for (int n = 0; n < 2; ++n) {
      for (int e = 0; e < 4; ++e) {  // element (row r8 (+8), column 2q (+1)) of tile n: d = s - u
        const int d = d0 + r8 + (e >= 2 ? 8 : 0) - n * 8 - 2 * q - (e & 1);
        if (d >= 0 && d < T) atomicAdd(&lags[d], acc[n][e]);
      }
    }
  }
  __syncthreads();
  for (int d = threadIdx.x; d < T; d += THREADS) part[((size_t)blockIdx.y * C + c) * T + (T - 1 - d)] = lags[d];
}

template <typename S>
__global__ void gw_sum(const float* __restrict__ part, S* __restrict__ gw, int P, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    float s = 0.f;
    for (int p = 0; p < P; ++p) s += part[p * n + i];
    gw[i] = from_float<S>(s);
  }
}

// Raise a kernel's dynamic shared memory limit to `bytes` when it is below, once per device and size:
// GPUs differ in what they allow (227 KiB on sm_90, 99 KiB on sm_86/89), so never ask for more than
// this T needs.
template <typename Kernel>
cudaError_t allow_smem(Kernel kernel, size_t bytes) {
  static std::mutex lock;
  static std::map<std::pair<int, const void*>, size_t> granted;
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  const std::lock_guard<std::mutex> guard(lock);
  size_t& have = granted[std::make_pair(device, reinterpret_cast<const void*>(kernel))];
  if (bytes <= have || bytes <= 48 * 1024) return cudaSuccess;
  err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
  if (err == cudaSuccess) have = bytes;
  return err;
}

template <typename S, bool BACK>
cudaError_t launch_toeplitz(const S* w, const S* x, S* y, float eps, int B, int C, int T, cudaStream_t stream) {
  cudaError_t err = allow_smem(toeplitz_mma<S, BACK>, toeplitz_smem(T));
  if (err != cudaSuccess) return err;
  const dim3 grid(C, (B + ROWS - 1) / ROWS);
  toeplitz_mma<S, BACK><<<grid, THREADS, toeplitz_smem(T), stream>>>(w, x, y, eps, B, C, T);
  return cudaGetLastError();
}

}  // namespace

size_t timex_mma_smem(int T, bool backward) {
  return backward ? (toeplitz_smem(T) > gw_smem(T) ? toeplitz_smem(T) : gw_smem(T)) : toeplitz_smem(T);
}

size_t timex_mma_scratch(int B, int C, int T, bool backward) {
  return backward ? (size_t)((B + GW_ROWS - 1) / GW_ROWS) * C * T : 0;
}

cudaError_t timex_mma_forward(TimexDtype dtype, const void* w, const void* k, void* out, float eps, int B, int C,
                              int T, cudaStream_t stream) {
  if (dtype == TIMEX_F32 || T > TIMEX_MMA_TMAX) return cudaErrorInvalidValue;
  return with_storage(dtype, [&](auto* tag) -> cudaError_t {
    using S = std::remove_pointer_t<decltype(tag)>;
    if constexpr (std::is_same_v<S, float>) {
      return cudaErrorInvalidValue;
    } else {
      return launch_toeplitz<S, false>(static_cast<const S*>(w), static_cast<const S*>(k), static_cast<S*>(out),
                                       eps, B, C, T, stream);
    }
  });
}

cudaError_t timex_mma_gw(TimexDtype dtype, const void* k, const void* g, void* gw, float* scratch, int B, int C, int T,
                         cudaStream_t stream) {
  if (dtype == TIMEX_F32 || T > TIMEX_MMA_TMAX) return cudaErrorInvalidValue;
  return with_storage(dtype, [&](auto* tag) -> cudaError_t {
    using S = std::remove_pointer_t<decltype(tag)>;
    if constexpr (std::is_same_v<S, float>) {
      return cudaErrorInvalidValue;
    } else {
      cudaError_t err = allow_smem(gw_mma<S>, gw_smem(T));
      if (err != cudaSuccess) return err;
      const int parts = (B + GW_ROWS - 1) / GW_ROWS;
      gw_mma<S><<<dim3(C, parts), THREADS, gw_smem(T), stream>>>(static_cast<const S*>(k), static_cast<const S*>(g),
                                                                 scratch, B, C, T);
      if ((err = cudaGetLastError()) != cudaSuccess) return err;
      const size_t n = (size_t)C * T;
      gw_sum<S><<<(unsigned)((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096), 256, 0, stream>>>(
          scratch, static_cast<S*>(gw), parts, n);
      return cudaGetLastError();
    }
  });
}

cudaError_t timex_mma_backward(TimexDtype dtype, const void* w, const void* k, const void* g, void* gw, void* gk,
                               float* scratch, int B, int C, int T, cudaStream_t stream) {
  if (dtype == TIMEX_F32 || T > TIMEX_MMA_TMAX) return cudaErrorInvalidValue;
  const cudaError_t err = with_storage(dtype, [&](auto* tag) -> cudaError_t {
    using S = std::remove_pointer_t<decltype(tag)>;
    if constexpr (std::is_same_v<S, float>) {
      return cudaErrorInvalidValue;
    } else {
      return launch_toeplitz<S, true>(static_cast<const S*>(w), static_cast<const S*>(g), static_cast<S*>(gk), 0.f, B,
                                      C, T, stream);
    }
  });
  return err != cudaSuccess ? err : timex_mma_gw(dtype, k, g, gw, scratch, B, C, T, stream);
}
