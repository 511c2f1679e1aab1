// timex-fft beyond T = 1024: one row per FFT, up to T = 16384 (timex_fft.cu and timex_fft_warp.cu do
// T <= 1024).
//
// A real row x of the N-point transform (N = 2M, M the smallest power of two >= T, zero padded) is
// packed as z[n] = x[2n] + i·x[2n+1], so one complex FFT of M points does the whole row, and one
// buffer of M points fits one block's shared memory up to M = 16384 (136 KiB). Its spectrum unpacks as
//   X[a] = Xe[a] + t·Xo[a],  X[a+M] = Xe[a] - t·Xo[a],   t = exp(-2πi a/N), a < M,
//   Xe[a] = (Z[a] + conj(Z[M-a])) / 2,  Xo[a] = (Z[a] - conj(Z[M-a])) / 2i,
// and a product spectrum Y packs back as Z'[a] = (Y[a] + Y[a+M])/2 + i·conj(t)·(Y[a] - Y[a+M])/2,
// whose inverse M-point transform is y[2n] + i·y[2n+1] (times M). The kernels:
//   spectrum  W[c, 0..M] = half spectrum of ww[j] = w[c, T-1-j], into scratch (one block per channel)
//   forward   out = eps + IFFT(W · X)            one block per row, the rows of a channel adjacent
//   rows      K_b = spectrum of each row of k, into scratch
//   backward  gk  = IFFT(conj(W) · G), and S[c] += conj(K_b)·G_b with atomic adds (one row per block;
//             S is the size of one row's spectrum per channel, so the adds stay in L2, where per-row
//             cross spectra summed afterwards cost 800 MB of DRAM traffic at B=8, T=4096)
//   gw        gw[c, T-1-j] = IFFT(S[c])[j]                 one block per channel
// The order of the atomic adds varies, so gw may differ in its last bits from run to run.
// A row's M points are held in the registers of its block (fft_passes.cuh: 16 or 32 per thread,
// passes of radix 16 or 32, exchanges through shared memory), so the output of a transform stays in
// registers, and only the product step needs a point's mirror M-a from the buffer. This replaced
// in-place Stockham passes (radix 8, every pass reading and writing the whole buffer) and their
// N = 3·2^p sizes (at T = 3000 the old 3·2^p row took longer than a 2^p one does now): forward 26 %,
// forward+backward 30 % faster at B=8, T=4096 (H100, 2026-11-23). The math of the packing was checked against the direct convolution in numpy
// before it was written here.
#include <map>
#include <mutex>
#include <utility>

#include "fft_passes.cuh"
#include "timex.h"

namespace {

using namespace timex_fft;

struct Half {  // the M-point packed transform of a row of length T (N = 2M >= 2T-1)
  int M, T, N;
};

__host__ __device__ inline Half half_for(int T) {
  int M = 1;
  while (M < T) M *= 2;
  return {M, T, 2 * M};
}

__device__ __forceinline__ float2 conj(float2 a) { return make_float2(a.x, -a.y); }
__device__ __forceinline__ float2 scale(float2 a, float s) { return make_float2(a.x * s, a.y * s); }


// X[a] (lo) and X[a+M] (hi) of the real row packed in Z, from za = Z[a] and zb = Z[(M-a) % M].
__device__ __forceinline__ void unpack(float2 za, float2 zb, float2 t, float2& lo, float2& hi) {
  const float2 zb_c = conj(zb);
  const float2 xe = scale(add(za, zb_c), 0.5f);
  const float2 xo = scale(rot<-1>(sub(za, zb_c)), 0.5f);  // (za - conj(zb)) / 2i
  const float2 to = cmul(t, xo);
  lo = add(xe, to);
  hi = sub(xe, to);
}

// Z'[a] from Y[a] (lo) and Y[a+M] (hi) of a real result: its inverse transform packs y[2n] + i·y[2n+1].
__device__ __forceinline__ float2 pack(float2 lo, float2 hi, float2 t) {
  const float2 ye = scale(add(lo, hi), 0.5f);
  const float2 yo = scale(cmul_conj(t, sub(lo, hi)), 0.5f);
  return add(ye, rot<1>(yo));
}

// The product step, in place: Z'[a] = pack(X[a]·W~[a], X[a+M]·W~[a+M]) with W~ = W, or conj(W)
// when CONJ. W holds the half spectrum W[0..M] of a real signal: W[a+M] = conj(W[M-a]). Each thread
// takes the pairs (f, M-f), so the values it reads are the ones it writes.
template <bool CONJ>
__device__ __forceinline__ float2 product(int a, float2 za, float2 zb, const float2* __restrict__ W,
                                          const float2* __restrict__ tw, const Half& h) {
  const float2 t = tw[a];
  float2 lo, hi;
  unpack(za, zb, t, lo, hi);
  const float2 wlo = W[a], whi = conj(W[h.M - a]);  // W[a], W[a+M]
  lo = CONJ ? cmul_conj(wlo, lo) : cmul(wlo, lo);
  hi = CONJ ? cmul_conj(whi, hi) : cmul(whi, hi);
  return pack(lo, hi, t);
}

// The plan of a row of M points: G threads (M/G points each), the passes (each radix divides M/G),
// and where the product step finds a point's mirror M-a: in registers, each thread's own points
// with the mirror read from the buffer (fewer shared-memory accesses), or in the buffer, each thread
// taking pairs (a, M-a) there (fewer registers: at M = 16384 the other spilled and was 20 % slower).
// M = 16384 has 32 points per thread: at 16 (1024 threads, 64 registers) it spilled too. The kernels
// declare at least one block per SM (__launch_bounds__(G, 1)): without it ptxas held M = 4096 to 145
// registers where it now takes 187 for more loads in flight, at the same one block per SM, and the
// forward ran 278 instead of 344 us (B=8, T=4096, H100). fresh_inverse: the inverse transform after the
// product step takes the twiddle table and its thread index as values nvcc cannot prove equal to the
// first transform's (opaque), so it does not keep that transform's twiddle loads and addresses live
// across the product step. At M = 16384 they took 136 bytes a thread of spills in the forward; hidden,
// none, and the forward at B=2, T=16384 went from 462 to 421 us, at B=8, T=2048 from 138 to 124 us; at
// M = 4096 and 8192 hiding them made it 3-12 % slower (H100, 2026-11-27).
template <int M>
struct BlockPlan;
template <>
struct BlockPlan<2048> {
  static constexpr int G = 128;
  static constexpr bool pairs_in_buffer = false;
  static constexpr bool fresh_inverse = true;
  using type = Radices<16, 16, 8>;
};
template <>
struct BlockPlan<4096> {
  static constexpr int G = 256;
  static constexpr bool pairs_in_buffer = false;
  static constexpr bool fresh_inverse = false;
  using type = Radices<16, 16, 16>;
};
template <>
struct BlockPlan<8192> {
  static constexpr int G = 512;
  static constexpr bool pairs_in_buffer = true;
  static constexpr bool fresh_inverse = false;
  using type = Radices<16, 16, 16, 2>;
};
template <>
struct BlockPlan<16384> {
  static constexpr int G = 512;
  static constexpr bool pairs_in_buffer = true;
  static constexpr bool fresh_inverse = true;
  using type = Radices<32, 32, 16>;
};

// f(a, b) for this thread's pairs of points (a, b = (M - a) % M), a = me + G·i up to M/2 (G: the plan's
// threads), each once (a == b at 0 and M/2). Their count is fixed at compile time, so the loop unrolls and
// the global loads of several pairs are in flight together: a loop of unknown length waited for each
// pair's loads, and that wait was a third of block_forward's stall samples at M = 16384 (Nsight Compute, H100).
template <int M, typename F>
__device__ __forceinline__ void for_pairs(F&& f) {
  constexpr int G = BlockPlan<M>::G;
  static_assert((M / 2) % G == 0, "the pairs below M/2 fall evenly on the threads");
#pragma unroll 4
  for (int i = 0; i < M / 2 / G; ++i) {
    const int a = threadIdx.x + G * i;
    f(a, (M - a) & (M - 1));
  }
  if (threadIdx.x == 0) f(M / 2, M / 2);
}

template <bool CONJ, int M>
__device__ void multiply_packed(float2* buf, const float2* __restrict__ W, const float2* __restrict__ tw,
                                const Half& h) {
  for_pairs<M>([&](int f, int g) {
    const float2 zf = buf[pad(f)], zg = buf[pad(g)];
    buf[pad(f)] = product<CONJ>(f, zf, zg, W, tw, h);
    if (g != f) buf[pad(g)] = product<CONJ>(g, zg, zf, W, tw, h);
  });
  __syncthreads();
}

template <int M>
constexpr int held_points = M / BlockPlan<M>::G;

// exp(SIGN 2πi m / M) from the table of exp(-2πi m' / 2M).
template <int SIGN>
struct HalfTableTwiddles {
  const float2* __restrict__ table;
  __device__ __forceinline__ float2 operator()(int m, int) const { return twiddle_from<SIGN>(table, 2 * m); }
};

template <int M, int SIGN, bool HALF_IN, bool HALF_OUT>
__device__ __forceinline__ void block_fft(float2 (&v)[held_points<M>], float2* buf, const float2* __restrict__ tw) {
  using Plan = BlockPlan<M>;
  group_fft<M, Plan::G, SIGN, HALF_IN, HALF_OUT, typename Plan::type, BlockSync>(v, buf, HalfTableTwiddles<SIGN>{tw},
                                                                                 threadIdx.x);
}

// The inverse transform after a product step (block_forward, block_backward; see BlockPlan::fresh_inverse).
template <int M>
__device__ __forceinline__ void block_inverse(float2 (&v)[held_points<M>], float2* buf, const float2* __restrict__ tw) {
  using Plan = BlockPlan<M>;
  constexpr bool fresh = Plan::fresh_inverse;
  const int me = threadIdx.x;
  group_fft<M, Plan::G, 1, false, true, typename Plan::type, BlockSync>(
      v, buf, HalfTableTwiddles<1>{fresh ? opaque(tw) : tw}, fresh ? opaque(me) : me);
}

template <int M>
__device__ __forceinline__ Half half_of(int T) {
  return {M, T, 2 * M};
}

// This thread's packed points n = me + G·m (m < P/2) of x[i] = src[i·step], zero from T on; the
// points from M/2 on are zero too, and block_fft's HALF_IN does not read them.
template <int M, typename S>
__device__ __forceinline__ void load_held(float2 (&v)[held_points<M>], const S* src, int step, int T) {
#pragma unroll
  for (int m = 0; m < held_points<M> / 2; ++m) {
    const long long i = 2 * (threadIdx.x + BlockPlan<M>::G * m);
    v[m] = make_float2(i < T ? to_float(src[i * step]) : 0.0f, i + 1 < T ? to_float(src[(i + 1) * step]) : 0.0f);
  }
}

// dst[i] = offset + y[i]/M for i < T, from this thread's packed inverse-transform points.
template <int M, typename S>
__device__ __forceinline__ void store_held(S* dst, int step, const float2 (&v)[held_points<M>], float offset,
                                           int T) {
  constexpr float s = 1.0f / M;
#pragma unroll
  for (int m = 0; m < held_points<M> / 2; ++m) {
    const long long i = 2 * (threadIdx.x + BlockPlan<M>::G * m);
    if (i < T) dst[i * step] = from_float<S>(offset + v[m].x * s);
    if (i + 1 < T) dst[(i + 1) * step] = from_float<S>(offset + v[m].y * s);
  }
}

// Z[(M - a) % M] for this thread's point a = me + G·m, from the transform block_fft left in buf.
template <int M>
__device__ __forceinline__ float2 mirror(const float2* buf, int m) {
  return buf[pad((M - (int)threadIdx.x - BlockPlan<M>::G * m) % M)];
}

template <int M>
__device__ __forceinline__ int point(int m) {
  return threadIdx.x + BlockPlan<M>::G * m;
}

// The half spectrum X[0..M] of a real row into dst, from its packed transform (this thread's points in
// v, all of them in buf, as block_fft leaves them). Reads buf only.
template <int M>
__device__ __forceinline__ void store_half_spectrum(const float2 (&v)[held_points<M>], const float2* buf,
                                                    const float2* __restrict__ tw, float2* dst) {
#pragma unroll
  for (int m = 0; m < held_points<M>; ++m) {
    const int a = point<M>(m);
    float2 lo, hi;
    unpack(v[m], mirror<M>(buf, m), tw[a], lo, hi);
    dst[a] = lo;
    if (a == 0) dst[M] = hi;  // X[M] is X[0 + M]
  }
}

// The half spectrum X[0..M] of a real row (reversed when step < 0) into dst: block_spectrum's
// weights, block_row_spectrum's rows of k.
template <int M, typename S>
__device__ __forceinline__ void half_spectrum(const S* src, int step, const float2* __restrict__ tw, float2* dst,
                                              int T) {
  extern __shared__ float2 buf[];
  float2 v[held_points<M>];
  load_held<M>(v, src, step, T);
  block_fft<M, -1, true, false>(v, buf, tw);
  store_half_spectrum<M>(v, buf, tw, dst);
}

template <typename S, int M>
__global__ void __launch_bounds__(BlockPlan<M>::G, 1)
block_spectrum(const S* __restrict__ w, const float2* __restrict__ tw, float2* __restrict__ W, int T) {
  const int c = blockIdx.x;
  half_spectrum<M>(w + (size_t)c * T + (T - 1), -1, tw, W + (size_t)c * (M + 1), T);  // ww[j] = w[c, T-1-j]
}

template <typename S, int M>
__global__ void __launch_bounds__(BlockPlan<M>::G, 1)
block_row_spectrum(const S* __restrict__ k, const float2* __restrict__ tw, float2* __restrict__ kspec, int B, int C,
                   int T) {
  const size_t r = (size_t)(blockIdx.x % B) * C + blockIdx.x / B;  // the rows of a channel adjacent
  half_spectrum<M>(k + r * T, 1, tw, kspec + r * (M + 1), T);
}

// kspec (when not null): each row's half spectrum left for the backward, as block_row_spectrum makes it.
template <typename S, int M>
__global__ void __launch_bounds__(BlockPlan<M>::G, 1)
block_forward(const float2* __restrict__ W, const float2* __restrict__ tw, const S* __restrict__ k,
              S* __restrict__ out, float2* __restrict__ kspec, float eps, int B, int C, int T) {
  extern __shared__ float2 buf[];
  const int c = blockIdx.x / B, b = blockIdx.x % B;
  const size_t row = ((size_t)b * C + c) * T;
  const Half h = half_of<M>(T);
  const float2* Wc = W + (size_t)c * (M + 1);
  float2 v[held_points<M>];
  load_held<M>(v, k + row, 1, T);
  block_fft<M, -1, true, false>(v, buf, tw);
  if (kspec != nullptr) {
    store_half_spectrum<M>(v, buf, tw, kspec + ((size_t)b * C + c) * (M + 1));
    if constexpr (BlockPlan<M>::pairs_in_buffer) __syncthreads();  // the mirrors read before the product writes
  }
  if constexpr (BlockPlan<M>::pairs_in_buffer) {
    multiply_packed<false, M>(buf, Wc, tw, h);
#pragma unroll
    for (int m = 0; m < held_points<M>; ++m) v[m] = buf[pad(point<M>(m))];
  } else {
#pragma unroll
    for (int m = 0; m < held_points<M>; ++m) v[m] = product<false>(point<M>(m), v[m], mirror<M>(buf, m), Wc, tw, h);
  }
  __syncthreads();  // every read of buf before the inverse's first exchange
  block_inverse<M>(v, buf, tw);
  store_held<M>(out + row, 1, v, eps, T);
}

// gk = IFFT(conj(W)·G), and S[c] += conj(K_b)·G_b over the half spectrum a = 0..M. K_b is read once, with
// the streaming hint (__ldcs), so the kept spectra do not push the sums S out of L2.
template <typename S, int M>
__global__ void __launch_bounds__(BlockPlan<M>::G, 1)
block_backward(const float2* __restrict__ W, const float2* __restrict__ tw, const S* __restrict__ g,
               S* __restrict__ gk, const float2* __restrict__ kspec, float2* __restrict__ sums, int B, int C, int T) {
  extern __shared__ float2 buf[];
  const int c = blockIdx.x / B, b = blockIdx.x % B;
  const size_t row = ((size_t)b * C + c) * T;
  const Half h = half_of<M>(T);
  const float2* K = kspec + ((size_t)b * C + c) * (M + 1);
  const float2* Wc = W + (size_t)c * (M + 1);
  float2* Sc = sums + (size_t)c * (M + 1);
  float2 v[held_points<M>];
  load_held<M>(v, g + row, 1, T);
  block_fft<M, -1, true, false>(v, buf, tw);
  if constexpr (BlockPlan<M>::pairs_in_buffer) {
    for_pairs<M>([&](int f, int) {
      float2 lo, hi;
      unpack(buf[pad(f)], buf[pad((M - f) % M)], tw[f], lo, hi);
      atomic_add(Sc + f, cmul_conj(__ldcs(K + f), lo));
      if (M - f != f) atomic_add(Sc + M - f, cmul_conj(__ldcs(K + M - f), conj(hi)));
    });
    multiply_packed<true, M>(buf, Wc, tw, h);
#pragma unroll
    for (int m = 0; m < held_points<M>; ++m) v[m] = buf[pad(point<M>(m))];
  } else {
#pragma unroll
    for (int m = 0; m < held_points<M>; ++m) {
      const int a = point<M>(m);
      const float2 zb = mirror<M>(buf, m);
      float2 lo, hi;
      unpack(v[m], zb, tw[a], lo, hi);
      atomic_add(Sc + a, cmul_conj(__ldcs(K + a), lo));
      if (a == 0) atomic_add(Sc + M, cmul_conj(__ldcs(K + M), hi));
      v[m] = product<true>(a, v[m], zb, Wc, tw, h);
    }
  }
  __syncthreads();
  block_inverse<M>(v, buf, tw);
  store_held<M>(gk + row, 1, v, 0.0f, T);
}

// gw[c, T-1-j] = IFFT(S[c])[j]: pack, invert.
template <typename S, int M>
__global__ void __launch_bounds__(BlockPlan<M>::G, 1)
block_gw(const float2* __restrict__ sums, const float2* __restrict__ tw, S* __restrict__ gw, int C, int T) {
  extern __shared__ float2 buf[];
  const int c = blockIdx.x;
  const float2* Sc = sums + (size_t)c * (M + 1);
  float2 v[held_points<M>];
#pragma unroll
  for (int m = 0; m < held_points<M>; ++m) {
    const int a = point<M>(m);
    v[m] = pack(Sc[a], conj(Sc[M - a]), tw[a]);  // S[a+M] = conj(S[M-a])
  }
  block_fft<M, 1, false, true>(v, buf, tw);
  store_held<M>(gw + (size_t)c * T + (T - 1), -1, v, 0.0f, T);
}

// tw[m] = exp(-2πi m/N) for m <= M: the passes' and the packing's twiddles.
__global__ void long_twiddles(float2* __restrict__ tw, int M, int N) {
  fill_twiddles(tw, blockIdx.x * blockDim.x + threadIdx.x, M + 1, gridDim.x * blockDim.x, N);
}

size_t long_smem(int T) { return (size_t)padded(half_for(T).M) * sizeof(float2); }

// Each kernel may use up to what T = TIMEX_FFT_TMAX needs; set once per device and kernel.
template <typename Kernel>
cudaError_t allow_long_smem(Kernel kernel) {
  static std::mutex lock;
  static std::map<std::pair<int, const void*>, cudaError_t> done;
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  const std::lock_guard<std::mutex> guard(lock);
  const auto key = std::make_pair(device, reinterpret_cast<const void*>(kernel));
  auto it = done.find(key);
  if (it == done.end())
    it = done.emplace(key, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                (int)long_smem(TIMEX_FFT_TMAX))).first;
  return it->second;
}

size_t spectrum_floats(int C, int T) { return 2 * (size_t)C * (half_for(T).M + 1); }

// The scratch: the weights' spectra W (C·(M+1)), the twiddles (M+1), and for the backward the
// per-channel sums S (C·(M+1)) and each row's k-spectrum (B·C·(M+1)), all float2.
size_t twiddle_floats(int T) { return 2 * ((size_t)half_for(T).M + 1); }

float2* twiddles(float* scratch, int C, int T, cudaStream_t stream) {
  float2* tw = reinterpret_cast<float2*>(scratch + spectrum_floats(C, T));
  const Half h = half_for(T);
  long_twiddles<<<(h.M + 256) / 256, 256, 0, stream>>>(tw, h.M, h.N);
  return tw;
}

// f(std::integral_constant<int, M>) for a row of M = 2^p packed points (the block-held kernels).
template <typename F>
cudaError_t with_held_size(const Half& h, F&& f) {
  switch (h.M) {
    case 2048: return f(std::integral_constant<int, 2048>{});
    case 4096: return f(std::integral_constant<int, 4096>{});
    case 8192: return f(std::integral_constant<int, 8192>{});
    case 16384: return f(std::integral_constant<int, 16384>{});
  }
  return cudaErrorInvalidValue;
}

// Where the backward's scratch keeps each row's k-spectrum (after W, the twiddles and the sums S).
float2* row_spectra(float* scratch, int C, int T) {
  return reinterpret_cast<float2*>(scratch + 2 * spectrum_floats(C, T) + twiddle_floats(T));
}

template <typename S>
cudaError_t forward(const S* w, const S* k, S* out, float eps, float* scratch, int B, int C, int T,
                    bool keep_spectra, cudaStream_t stream) {
  if (scratch == nullptr) return cudaErrorInvalidValue;  // sized by timex_fft_long_scratch
  float2* W = reinterpret_cast<float2*>(scratch);
  float2* kspec = keep_spectra ? row_spectra(scratch, C, T) : nullptr;
  return with_held_size(half_for(T), [&](auto size) {
    constexpr int M = decltype(size)::value, G = BlockPlan<M>::G;
    cudaError_t err;
    if ((err = allow_long_smem(block_spectrum<S, M>)) != cudaSuccess) return err;
    if ((err = allow_long_smem(block_forward<S, M>)) != cudaSuccess) return err;
    const float2* tw = twiddles(scratch, C, T, stream);
    const size_t smem = long_smem(T);
    block_spectrum<S, M><<<C, G, smem, stream>>>(w, tw, W, T);
    block_forward<S, M><<<(unsigned)((size_t)B * C), G, smem, stream>>>(W, tw, k, out, kspec, eps, B, C, T);
    return cudaGetLastError();
  });
}

template <typename S>
cudaError_t backward(const S* w, const S* k, const S* g, S* gw, S* gk, float* scratch, int B, int C, int T,
                     bool spectra_made, cudaStream_t stream) {
  if (scratch == nullptr) return cudaErrorInvalidValue;
  const size_t smem = long_smem(T), rows = (size_t)B * C;
  float2* W = reinterpret_cast<float2*>(scratch);
  float2* sums = reinterpret_cast<float2*>(scratch + spectrum_floats(C, T) + twiddle_floats(T));
  float2* kspec = row_spectra(scratch, C, T);
  return with_held_size(half_for(T), [&](auto size) {
    constexpr int M = decltype(size)::value, G = BlockPlan<M>::G;
    cudaError_t err;
    if ((err = allow_long_smem(block_spectrum<S, M>)) != cudaSuccess) return err;
    if ((err = allow_long_smem(block_row_spectrum<S, M>)) != cudaSuccess) return err;
    if ((err = allow_long_smem(block_backward<S, M>)) != cudaSuccess) return err;
    if ((err = allow_long_smem(block_gw<S, M>)) != cudaSuccess) return err;
    const float2* tw = spectra_made ? reinterpret_cast<const float2*>(scratch + spectrum_floats(C, T))
                                    : twiddles(scratch, C, T, stream);
    if ((err = cudaMemsetAsync(sums, 0, spectrum_floats(C, T) * sizeof(float), stream)) != cudaSuccess) return err;
    if (!spectra_made) {  // else the forward left W, the twiddles and every row's spectrum here
      block_spectrum<S, M><<<C, G, smem, stream>>>(w, tw, W, T);
      block_row_spectrum<S, M><<<(unsigned)rows, G, smem, stream>>>(k, tw, kspec, B, C, T);
    }
    block_backward<S, M><<<(unsigned)rows, G, smem, stream>>>(W, tw, g, gk, kspec, sums, B, C, T);
    block_gw<S, M><<<C, G, smem, stream>>>(sums, tw, gw, C, T);
    return cudaGetLastError();
  });
}

}  // namespace

size_t timex_fft_long_scratch(int B, int C, int T, bool backward) {
  const size_t w = spectrum_floats(C, T);
  return twiddle_floats(T) + (backward ? w * (2 + (size_t)B) : w);  // see twiddle_floats
}

cudaError_t timex_fft_long_forward(TimexDtype dtype, const void* w, const void* k, void* out, float eps,
                                   float* scratch, int B, int C, int T, cudaStream_t stream) {
  return with_storage(dtype, [&](auto tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    return forward((const S*)w, (const S*)k, (S*)out, eps, scratch, B, C, T, false, stream);
  });
}

cudaError_t timex_fft_long_backward(TimexDtype dtype, const void* w, const void* k, const void* g, void* gw,
                                    void* gk, float* scratch, int B, int C, int T, cudaStream_t stream) {
  return with_storage(dtype, [&](auto tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    return backward((const S*)w, (const S*)k, (const S*)g, (S*)gw, (S*)gk, scratch, B, C, T, false, stream);
  });
}

size_t timex_fft_saved_floats(int B, int C, int T) {
  return T > TIMEX_TMAX ? timex_fft_long_scratch(B, C, T, true) : 0;
}

cudaError_t timex_fft_forward_saving(TimexDtype dtype, const void* w, const void* k, void* out, float eps,
                                     float* saved, int B, int C, int T, cudaStream_t stream) {
  if (T <= TIMEX_TMAX) return cudaErrorInvalidValue;  // nothing is kept there: timex_fft_saved_floats is 0
  return with_storage(dtype, [&](auto tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    return forward((const S*)w, (const S*)k, (S*)out, eps, saved, B, C, T, true, stream);
  });
}

cudaError_t timex_fft_backward_saved(TimexDtype dtype, const void* w, const void* k, const void* g, void* gw,
                                     void* gk, float* saved, int B, int C, int T, cudaStream_t stream) {
  if (T <= TIMEX_TMAX) return cudaErrorInvalidValue;
  return with_storage(dtype, [&](auto tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    return backward((const S*)w, (const S*)k, (const S*)g, (S*)gw, (S*)gk, saved, B, C, T, true, stream);
  });
}
