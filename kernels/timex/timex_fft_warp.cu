// timex-fft for 192 < T <= 1024 (backward: T <= 768): one warp per transform, held in registers.
//
// Same math as timex_fft.cu (two batch rows packed as the real and imaginary parts of one complex
// signal, N = 2^p or 3·2^p >= 2T-1 points), another schedule. The N points of a transform live in
// the 32 lanes of one warp (fft_passes.cuh: N/32 per lane, a few passes of radix 16, 16, 6 at N = 1536,
// each an exchange through the warp's own shared-memory buffer), with only __syncwarp between passes,
// no block barriers, no idle threads, index math folded to constants, and the twiddles of a pass from a table in global memory
// (L1-resident, made in float64 once per call) instead of a sincospif per butterfly. timex_fft.cu's
// kernels were bound by instruction issue (ncu: 74 % of SM throughput at the seed shape), and this
// spends far fewer instructions per point.
//
// The kernels of one call:
//   spectra   twiddle table; WW[c] = FFT(ww)/N, ww[j] = w[c, T-1-j] (one warp per channel); zeroes S
//   forward   out = eps + IFFT(WW · FFT(k_b + i k_b'))
//   backward  gk = IFFT(conj(WW) · G), G = FFT(g_b + i g_b'); S[c] += conj(K)·G, K = FFT(k_b + i k_b')
//   gw        gw[c, T-1-j] = Re IFFT(S[c])[j] / N
// The packed cross spectrum needs no unpacking: conj(K1 + iK2)·(G1 + iG2) = (conj(K1)G1 + conj(K2)G2)
// + i(conj(K1)G2 - conj(K2)G1), and both brackets are spectra of real signals, so the real part of
// its inverse is exactly the sum of the two rows' cross-correlations. S is summed with float2
// atomics in L2, so gw may differ in its last bits from run to run.
#include "fft_passes.cuh"
#include "timex.h"

namespace {

using namespace timex_fft;

constexpr int LANES = 32;
constexpr int WARPS = 4;  // warps per block, each on its own transforms

// The passes for each supported N: every radix divides P = N/32, and the one that is not a power of
// two comes last (so every earlier Ns is a power of two).
template <int N>
struct PlanOf;
template <>
struct PlanOf<512> {
  using type = Radices<16, 16, 2>;
};
template <>
struct PlanOf<768> {
  using type = Radices<8, 8, 12>;
};
template <>
struct PlanOf<1024> {
  using type = Radices<32, 32>;
};
template <>
struct PlanOf<1536> {
  using type = Radices<16, 16, 6>;
};
template <>
struct PlanOf<2048> {
  using type = Radices<16, 16, 8>;
};

// exp(SIGN 2πi m / N) for m < N: the table holds exp(-2πi m / N).
template <int SIGN>
struct TableTwiddles {
  const float2* __restrict__ table;
  __device__ __forceinline__ float2 operator()(int m, int) const {
    const float2 t = __ldg(table + m);
    return SIGN < 0 ? t : make_float2(t.x, -t.y);
  }
};

// The same values computed on the spot (in the kernel that writes the table).
template <int SIGN>
struct ExactTwiddles {
  __device__ __forceinline__ float2 operator()(int m, int N) const {
    double s, c;
    sincospi(2.0 * SIGN * m / N, &s, &c);
    return make_float2((float)c, (float)s);
  }
};

// The N-point DFT (sign SIGN) of the warp's values, natural order in and out (lane-major layout).
// HALF_IN: points N/2.. are zero (need not be set); HALF_OUT: only points ..N/2 come out right.
template <int N, int SIGN, bool HALF_IN, bool HALF_OUT, typename Tw>
__device__ __forceinline__ void warp_fft(float2 (&v)[N / LANES], float2* buf, const Tw& tw, int lane) {
  group_fft<N, LANES, SIGN, HALF_IN, HALF_OUT, typename PlanOf<N>::type, WarpSync>(v, buf, tw, lane);
}

// Lane `lane`'s points of the packed pair (re[n], im[n]) for n < T (im may be absent), zero beyond.
// T <= N/2, so only the lower half is loaded: warp_fft's HALF_IN never reads the upper one.
template <int N, typename S>
__device__ __forceinline__ void load_rows(float2 (&v)[N / LANES], const S* re, const S* im, int T, int lane) {
#pragma unroll
  for (int m = 0; m < N / LANES / 2; ++m) {
    const int n = lane + LANES * m;
    v[m] = n < T ? make_float2(to_float(re[n]), im ? to_float(im[n]) : 0.0f) : make_float2(0.0f, 0.0f);
  }
}

// A warp's task: one pair of batch rows (b, b+1) of channel c. Channels vary fastest: warps that run
// at the same time then add into different channels' S (same-address atomics serialise in L2).
struct Task {
  int c, b;
  bool two, valid;
};

__device__ __forceinline__ Task my_task(int B, int C) {
  const int pairs = (B + 1) / 2;
  const long long t = (long long)blockIdx.x * WARPS + threadIdx.x / LANES;
  if (t >= (long long)pairs * C) return {0, 0, false, false};
  const int b = 2 * (int)(t / C);
  return {(int)(t % C), b, b + 1 < B, true};
}

__device__ __forceinline__ float2* warp_buffer(float2* smem, int per_warp) { return smem + (threadIdx.x / LANES) * per_warp; }

// The twiddle table, the weights' spectra (scaled by 1/N) and, for the backward, S zeroed.
template <typename S, int N>
__global__ void __launch_bounds__(WARPS* LANES)
warp_spectra(const S* __restrict__ w, float2* __restrict__ spectra, float2* __restrict__ table,
             float2* __restrict__ sums, int C, int T) {
  extern __shared__ float2 smem2[];
  const int lane = threadIdx.x % LANES;
  const int threads = gridDim.x * blockDim.x;
  for (int m = blockIdx.x * blockDim.x + threadIdx.x; m < N; m += threads) table[m] = ExactTwiddles<-1>{}(m, N);
  const int c = blockIdx.x * WARPS + threadIdx.x / LANES;
  if (c >= C) return;
  float2 v[N / LANES];
  const S* wr = w + (size_t)c * T;
#pragma unroll
  for (int m = 0; m < N / LANES / 2; ++m) {
    const int n = lane + LANES * m;
    v[m] = make_float2(n < T ? to_float(wr[T - 1 - n]) : 0.0f, 0.0f);
  }
  warp_fft<N, -1, true, false>(v, warp_buffer(smem2, padded(N)), ExactTwiddles<-1>{}, lane);
  const float scale = 1.0f / N;
  float2* dst = spectra + (size_t)c * N;
#pragma unroll
  for (int m = 0; m < N / LANES; ++m) dst[lane + LANES * m] = make_float2(v[m].x * scale, v[m].y * scale);
  if (sums != nullptr) {
#pragma unroll
    for (int m = 0; m < N / LANES; ++m) sums[(size_t)c * N + lane + LANES * m] = make_float2(0.0f, 0.0f);
  }
}

// At N = 2048 the inverse takes the table and the lane through opaque (fft_math.cuh), as the long rows'
// fresh_inverse does: otherwise nvcc keeps the first transform's twiddle loads live across the product
// step and spills 380 bytes a thread; hidden, none, and the forward at B=32, C=768, T=1024 went from 235
// to 207 us (H100, 2026-11-27). At N = 1536 (the seed shape) hiding them made it 9 % slower, so only there.
template <typename S, int N>
__global__ void __launch_bounds__(WARPS* LANES)
warp_forward(const S* __restrict__ k, const float2* __restrict__ spectra, const float2* __restrict__ table,
             S* __restrict__ out, float eps, int B, int C, int T) {
  extern __shared__ float2 smem2[];
  const Task task = my_task(B, C);
  if (!task.valid) return;  // the whole warp: nothing below waits on other warps
  const int lane = threadIdx.x % LANES;
  float2* buf = warp_buffer(smem2, padded(N));
  const size_t row = ((size_t)task.b * C + task.c) * T, next = (size_t)C * T;
  float2 v[N / LANES];
  load_rows<N>(v, k + row, task.two ? k + row + next : nullptr, T, lane);
  warp_fft<N, -1, true, false>(v, buf, TableTwiddles<-1>{table}, lane);
  const float2* ww = spectra + (size_t)task.c * N;
#pragma unroll
  for (int m = 0; m < N / LANES; ++m) v[m] = cmul(__ldg(ww + lane + LANES * m), v[m]);
  constexpr bool fresh = N == 2048;
  warp_fft<N, 1, false, true>(v, buf, TableTwiddles<1>{fresh ? opaque(table) : table}, fresh ? opaque(lane) : lane);
#pragma unroll
  for (int m = 0; m < N / LANES / 2; ++m) {
    const int n = lane + LANES * m;
    if (n < T) {
      out[row + n] = from_float<S>(eps + v[m].x);
      if (task.two) out[row + next + n] = from_float<S>(eps + v[m].y);
    }
  }
}

// Per warp: the exchange buffer, then K of the current pair.
template <typename S, int N>
__global__ void __launch_bounds__(WARPS* LANES)
warp_backward(const S* __restrict__ k, const S* __restrict__ g, const float2* __restrict__ spectra,
              const float2* __restrict__ table, float2* __restrict__ sums, S* __restrict__ gk, int B, int C, int T) {
  extern __shared__ float2 smem2[];
  const Task task = my_task(B, C);
  if (!task.valid) return;
  const int lane = threadIdx.x % LANES;
  float2* buf = warp_buffer(smem2, padded(N) + N);
  float2* kept = buf + padded(N);
  const size_t row = ((size_t)task.b * C + task.c) * T, next = (size_t)C * T;
  float2 v[N / LANES];
  load_rows<N>(v, k + row, task.two ? k + row + next : nullptr, T, lane);
  warp_fft<N, -1, true, false>(v, buf, TableTwiddles<-1>{table}, lane);
#pragma unroll
  for (int m = 0; m < N / LANES; ++m) kept[lane + LANES * m] = v[m];  // read back by this lane only
  load_rows<N>(v, g + row, task.two ? g + row + next : nullptr, T, lane);
  warp_fft<N, -1, true, false>(v, buf, TableTwiddles<-1>{table}, lane);
  const float2* ww = spectra + (size_t)task.c * N;
  float2* s = sums + (size_t)task.c * N;
#pragma unroll
  for (int m = 0; m < N / LANES; ++m) {
    const int f = lane + LANES * m;
    atomic_add(s + f, cmul_conj(kept[f], v[m]));
    v[m] = cmul_conj(__ldg(ww + f), v[m]);
  }
  warp_fft<N, 1, false, true>(v, buf, TableTwiddles<1>{table}, lane);
#pragma unroll
  for (int m = 0; m < N / LANES / 2; ++m) {
    const int n = lane + LANES * m;
    if (n < T) {
      gk[row + n] = from_float<S>(v[m].x);
      if (task.two) gk[row + next + n] = from_float<S>(v[m].y);
    }
  }
}

// gw[c, T-1-j] = Re IFFT(S[c])[j] / N, one warp per channel.
template <typename S, int N>
__global__ void __launch_bounds__(WARPS* LANES)
warp_gw(const float2* __restrict__ sums, const float2* __restrict__ table, S* __restrict__ gw, int C, int T) {
  extern __shared__ float2 smem2[];
  const int c = blockIdx.x * WARPS + threadIdx.x / LANES;
  if (c >= C) return;
  const int lane = threadIdx.x % LANES;
  float2 v[N / LANES];
#pragma unroll
  for (int m = 0; m < N / LANES; ++m) v[m] = sums[(size_t)c * N + lane + LANES * m];
  warp_fft<N, 1, false, true>(v, warp_buffer(smem2, padded(N)), TableTwiddles<1>{table}, lane);
  const float scale = 1.0f / N;
#pragma unroll
  for (int m = 0; m < N / LANES / 2; ++m) {
    const int j = lane + LANES * m;
    if (j < T) gw[(size_t)c * T + T - 1 - j] = from_float<S>(v[m].x * scale);
  }
}

// Scratch (in float2): the weights' spectra C·N, the table N, and for the backward S, C·N.
struct Scratch {
  float2 *spectra, *table, *sums;
};

Scratch carve_scratch(float* scratch, int C, int N, bool backward) {
  float2* base = reinterpret_cast<float2*>(scratch);
  return {base, base + (size_t)C * N, backward ? base + (size_t)C * N + N : nullptr};
}

template <typename Kernel>
cudaError_t launch_ready(Kernel kernel, size_t smem) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
}

unsigned blocks_for(long long warps) { return (unsigned)((warps + WARPS - 1) / WARPS); }

template <typename S, int N>
cudaError_t forward_n(const S* w, const S* k, S* out, float eps, float* scratch, int B, int C, int T,
                      cudaStream_t stream) {
  const Scratch s = carve_scratch(scratch, C, N, false);
  const size_t smem = WARPS * padded(N) * sizeof(float2);
  cudaError_t err;
  if ((err = launch_ready(warp_spectra<S, N>, smem)) != cudaSuccess) return err;
  if ((err = launch_ready(warp_forward<S, N>, smem)) != cudaSuccess) return err;
  warp_spectra<S, N><<<blocks_for(C), WARPS * LANES, smem, stream>>>(w, s.spectra, s.table, nullptr, C, T);
  warp_forward<S, N><<<blocks_for((long long)C * ((B + 1) / 2)), WARPS * LANES, smem, stream>>>(
      k, s.spectra, s.table, out, eps, B, C, T);
  return cudaGetLastError();
}

template <typename S, int N>
cudaError_t backward_n(const S* w, const S* k, const S* g, S* gw, S* gk, float* scratch, int B, int C, int T,
                       cudaStream_t stream) {
  const Scratch s = carve_scratch(scratch, C, N, true);
  const size_t smem = WARPS * padded(N) * sizeof(float2), smem_bwd = WARPS * (padded(N) + N) * sizeof(float2);
  cudaError_t err;
  if ((err = launch_ready(warp_spectra<S, N>, smem)) != cudaSuccess) return err;
  if ((err = launch_ready(warp_backward<S, N>, smem_bwd)) != cudaSuccess) return err;
  if ((err = launch_ready(warp_gw<S, N>, smem)) != cudaSuccess) return err;
  warp_spectra<S, N><<<blocks_for(C), WARPS * LANES, smem, stream>>>(w, s.spectra, s.table, s.sums, C, T);
  warp_backward<S, N><<<blocks_for((long long)C * ((B + 1) / 2)), WARPS * LANES, smem_bwd, stream>>>(
      k, g, s.spectra, s.table, s.sums, gk, B, C, T);
  warp_gw<S, N><<<blocks_for(C), WARPS * LANES, smem, stream>>>(s.sums, s.table, gw, C, T);
  return cudaGetLastError();
}

// f(std::integral_constant<int, N>) for the transform size of T, or cudaErrorInvalidValue. The
// backward stops at N = 1536: at 2048 its 64 points per lane, twice (K kept while G is made), spill
// registers, and it measured 1.7x slower than timex_fft.cu's kernel (B=8, T=1024, H100), where the
// forward is 1.2x faster.
template <bool BACKWARD, typename F>
cudaError_t with_size(int T, F&& f) {
  switch (plan_for(T).N) {
    case 512: return f(std::integral_constant<int, 512>{});
    case 768: return f(std::integral_constant<int, 768>{});
    case 1024: return f(std::integral_constant<int, 1024>{});
    case 1536: return f(std::integral_constant<int, 1536>{});
    case 2048:
      if constexpr (!BACKWARD) return f(std::integral_constant<int, 2048>{});
  }
  return cudaErrorInvalidValue;
}

}  // namespace

bool timex_fft_warp_takes(int T, bool backward) {
  const int N = plan_for(T).N;
  return T <= TIMEX_TMAX && N >= 512 && N <= (backward ? 1536 : 2048);
}

size_t timex_fft_warp_scratch(int C, int T, bool backward) {
  const size_t N = plan_for(T).N;
  return 2 * N * ((backward ? 2 : 1) * (size_t)C + 1);
}

cudaError_t timex_fft_warp_forward(TimexDtype dtype, const void* w, const void* k, void* out, float eps,
                                   float* scratch, int B, int C, int T, cudaStream_t stream) {
  if (!timex_fft_warp_takes(T, false) || scratch == nullptr) return cudaErrorInvalidValue;
  return with_storage(dtype, [&](auto tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    return with_size<false>(T, [&](auto n) {
      return forward_n<S, decltype(n)::value>((const S*)w, (const S*)k, (S*)out, eps, scratch, B, C, T, stream);
    });
  });
}

cudaError_t timex_fft_warp_backward(TimexDtype dtype, const void* w, const void* k, const void* g, void* gw,
                                    void* gk, float* scratch, int B, int C, int T, cudaStream_t stream) {
  if (!timex_fft_warp_takes(T, true) || scratch == nullptr) return cudaErrorInvalidValue;
  return with_storage(dtype, [&](auto tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    return with_size<true>(T, [&](auto n) {
      return backward_n<S, decltype(n)::value>((const S*)w, (const S*)k, (const S*)g, (S*)gw, (S*)gk, scratch, B,
                                               C, T, stream);
    });
  });
}
