// timex-fft beyond T = 1024: one row per FFT, up to T = 16384 (timex_fft.cu does T <= 1024).
//
// A real row x of the N-point transform (N = 2^p or 3·2^p >= 2T-1, zero padded) is packed as
// z[n] = x[2n] + i·x[2n+1], so one complex FFT of M = N/2 points does the whole row, and one buffer
// of M points fits one block's shared memory up to M = 16384 (136 KiB). Its spectrum unpacks as
//   X[a] = Xe[a] + t·Xo[a],  X[a+M] = Xe[a] - t·Xo[a],   t = exp(-2πi a/N), a < M,
//   Xe[a] = (Z[a] + conj(Z[M-a])) / 2,  Xo[a] = (Z[a] - conj(Z[M-a])) / 2i,
// and a product spectrum Y packs back as Z'[a] = (Y[a] + Y[a+M])/2 + i·conj(t)·(Y[a] - Y[a+M])/2,
// whose inverse M-point transform is y[2n] + i·y[2n+1] (times M). The kernels:
//   spectrum  W[c, 0..M] = half spectrum of ww[j] = w[c, T-1-j], into scratch (one block per channel)
//   forward   out = eps + IFFT(W · X)            one block per row, the rows of a channel adjacent
//   rows      K_b = spectrum of each row of k, into scratch
//   backward  gk  = IFFT(conj(W) · G), and S[c] += conj(K_b)·G_b with atomic adds (one row per block:
//             with a loop over rows, or k transformed there too, the FFT spilled registers; S is the
//             size of one row's spectrum per channel, so the adds stay in L2, where per-row cross
//             spectra summed afterwards cost 800 MB of DRAM traffic at B=8, T=4096)
//   gw        gw[c, T-1-j] = IFFT(S[c])[j]                 one block per channel
// The order of the atomic adds varies, so gw may differ in its last bits from run to run.
// The FFT is in place: every pass reads its values into registers, waits, then writes (16 values
// per thread, M/16 threads), radix 8 while it divides, then 4 or 2, then 3. The math of the packing
// was checked against the direct convolution in numpy before it was written here.
#include <map>
#include <mutex>
#include <utility>

#include "fft_math.cuh"
#include "timex.h"

namespace {

using namespace timex_fft;

constexpr int PER_THREAD = 16;  // complex values per thread in a pass
constexpr int LONG_THREADS = 1024;

struct Half {  // the M-point packed transform of a row of length T: M = 2^log2, or 3·2^log2 when three
  int M, log2, T, N;
  bool three;
};

__host__ __device__ inline Half half_for(int T) {
  const Plan p = plan_for(T);  // N = 2^log2m or 3·2^log2m
  return {p.N / 2, p.log2m - 1, T, p.N, p.three};
}

// One in-place Stockham pass of radix R over M points (Ns already transformed per sub-sequence).
// HALF_IN: points M/2.. are zero and not read (a first pass); HALF_OUT: only points ..M/2 are
// written (a last pass, R even).
template <int R, int SIGN, bool HALF_IN = false, bool HALF_OUT = false>
__device__ __forceinline__ void pass_inplace(float2* buf, const float2* __restrict__ tw, const Half& h, int Ns) {
  const int M = h.M, step = h.N / (Ns * R);
  constexpr int P = (PER_THREAD + R - 1) / R;  // butterflies per thread, at most
  const int stride = M / R;
  float2 v[P][R];
#pragma unroll
  for (int i = 0; i < P; ++i) {
    const int j = threadIdx.x + i * blockDim.x;
    if (j < stride) {
#pragma unroll
      for (int r = 0; r < (HALF_IN ? R / 2 : R); ++r) v[i][r] = buf[pad(j + r * stride)];
    }
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < P; ++i) {
    const int j = threadIdx.x + i * blockDim.x;
    if (j < stride) {
      const int k = j & (Ns - 1);
      if constexpr (HALF_IN) {
        dft_half_in<R, SIGN>(v[i]);  // Ns == 1: no twiddles
      } else {
        butterfly<R, SIGN>(v[i], twiddle_from<SIGN>(tw, k * step), Ns > 1);
      }
      const int base = (j - k) * R + k;
#pragma unroll
      for (int q = 0; q < (HALF_OUT ? R / 2 : R); ++q) buf[pad(base + q * Ns)] = v[i][q];
    }
  }
  __syncthreads();
}

// The M-point transform in place. HALF_IN: the row's points from M/2 on are zero (always so for a
// packed row, as T <= M), and its first pass (radix 8) skips them; HALF_OUT: only the points below
// M/2 are wanted (the inverse of a row, T/2 <= M/2 packed outputs), and an even last radix skips the
// others. Both as in timex_fft_warp.cu: about 8 % fewer instructions per transform.
template <int SIGN, bool HALF_IN, bool HALF_OUT>
__device__ __noinline__ void fft_inplace(float2* buf, const float2* __restrict__ tw, const Half& h) {
  const int eights = h.log2 / 3;  // >= 3: M >= 1024 here
  const bool half_last = HALF_OUT && !h.three;
  int Ns = 1;
  for (int i = 0; i < eights; ++i, Ns *= 8) {
    if (HALF_IN && i == 0) {
      pass_inplace<8, SIGN, HALF_IN>(buf, tw, h, Ns);
    } else if (half_last && h.log2 % 3 == 0 && i == eights - 1) {
      pass_inplace<8, SIGN, false, HALF_OUT>(buf, tw, h, Ns);
    } else {
      pass_inplace<8, SIGN>(buf, tw, h, Ns);
    }
  }
  if (h.log2 % 3 == 1) {
    half_last ? pass_inplace<2, SIGN, false, HALF_OUT>(buf, tw, h, Ns) : pass_inplace<2, SIGN>(buf, tw, h, Ns);
    Ns *= 2;
  }
  if (h.log2 % 3 == 2) {
    half_last ? pass_inplace<4, SIGN, false, HALF_OUT>(buf, tw, h, Ns) : pass_inplace<4, SIGN>(buf, tw, h, Ns);
    Ns *= 4;
  }
  if (h.three) pass_inplace<3, SIGN>(buf, tw, h, Ns);
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

// buf[n] = x[2n] + i·x[2n+1] from x[i] = src[i·step] (i < T), zero beyond T, for n < M/2: the
// points from M/2 on are zero too, and fft_inplace's HALF_IN does not read them.
template <typename S>
__device__ void load_packed(float2* buf, const S* src, int step, const Half& h) {
  for (int n = threadIdx.x; 2 * n < h.M; n += blockDim.x) {
    const long long i = 2 * n;
    buf[pad(n)] = make_float2(i < h.T ? to_float(src[i * step]) : 0.0f,
                              i + 1 < h.T ? to_float(src[(i + 1) * step]) : 0.0f);
  }
}

// dst[i] = offset + y[i]/M for i < T, from the packed inverse transform in buf (dst step may be -1).
template <typename S>
__device__ void store_packed(S* dst, int step, const float2* buf, float offset, const Half& h) {
  const float s = 1.0f / h.M;
  for (int n = threadIdx.x; 2 * n < h.T; n += blockDim.x) {
    const float2 v = buf[pad(n)];
    dst[(long long)(2 * n) * step] = from_float<S>(offset + v.x * s);
    if (2 * n + 1 < h.T) dst[(long long)(2 * n + 1) * step] = from_float<S>(offset + v.y * s);
  }
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

template <bool CONJ>
__device__ void multiply_packed(float2* buf, const float2* __restrict__ W, const float2* __restrict__ tw,
                                const Half& h) {
  for (int f = threadIdx.x; 2 * f <= h.M; f += blockDim.x) {
    const int g = (h.M - f) % h.M;
    const float2 zf = buf[pad(f)], zg = buf[pad(g)];
    buf[pad(f)] = product<CONJ>(f, zf, zg, W, tw, h);
    if (g != f) buf[pad(g)] = product<CONJ>(g, zg, zf, W, tw, h);
  }
  __syncthreads();
}

template <typename S>
__global__ void __launch_bounds__(LONG_THREADS)
long_spectrum(const S* __restrict__ w, const float2* __restrict__ tw, float2* __restrict__ W, int T) {
  extern __shared__ float2 buf[];
  const Half h = half_for(T);
  const int c = blockIdx.x;
  load_packed(buf, w + (size_t)c * T + (T - 1), -1, h);  // ww[j] = w[c, T-1-j]
  __syncthreads();
  fft_inplace<-1, true, false>(buf, tw, h);
  float2* out = W + (size_t)c * (h.M + 1);
  for (int a = threadIdx.x; a <= h.M; a += blockDim.x) {
    const int i = a % h.M;
    float2 lo, hi;
    unpack(buf[pad(i)], buf[pad((h.M - i) % h.M)], tw[i], lo, hi);
    out[a] = a == h.M ? hi : lo;  // X[M] is X[0 + M]
  }
}

template <typename S>
__global__ void __launch_bounds__(LONG_THREADS)
long_forward(const float2* __restrict__ W, const float2* __restrict__ tw, const S* __restrict__ k, S* __restrict__ out, float eps,
             int B, int C, int T) {
  extern __shared__ float2 buf[];
  const Half h = half_for(T);
  const int c = blockIdx.x / B, b = blockIdx.x % B;
  const size_t row = ((size_t)b * C + c) * T;
  load_packed(buf, k + row, 1, h);
  __syncthreads();
  fft_inplace<-1, true, false>(buf, tw, h);
  multiply_packed<false>(buf, W + (size_t)c * (h.M + 1), tw, h);
  fft_inplace<1, false, true>(buf, tw, h);
  store_packed(out + row, 1, buf, eps, h);
}

// The half spectrum K_b[0..M] of each row of k into kspec[b, c] for long_backward (one row per
// block, the rows of a channel adjacent).
template <typename S>
__global__ void __launch_bounds__(LONG_THREADS)
long_row_spectrum(const S* __restrict__ k, const float2* __restrict__ tw, float2* __restrict__ kspec, int B, int C,
                  int T) {
  extern __shared__ float2 buf[];
  const Half h = half_for(T);
  const int c = blockIdx.x / B, b = blockIdx.x % B;
  load_packed(buf, k + ((size_t)b * C + c) * T, 1, h);
  __syncthreads();
  fft_inplace<-1, true, false>(buf, tw, h);
  float2* P = kspec + ((size_t)b * C + c) * (h.M + 1);
  for (int f = threadIdx.x; 2 * f <= h.M; f += blockDim.x) {  // K[f], K[M-f] = conj(K[f+M])
    float2 lo, hi;
    unpack(buf[pad(f)], buf[pad((h.M - f) % h.M)], tw[f], lo, hi);
    P[f] = lo;
    P[h.M - f] = conj(hi);
  }
}

__device__ __forceinline__ void atomic_add(float2* to, float2 v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(to, v);  // one vector atomic (sm_90) instead of two
#else
  atomicAdd(&to->x, v.x);
  atomicAdd(&to->y, v.y);
#endif
}

// One row per block: gk = IFFT(conj(W)·G), and S[c] += conj(K_b)·G_b. (Transforming k here too, in
// one kernel, made the FFT spill registers.)
template <typename S>
__global__ void __launch_bounds__(LONG_THREADS)
long_backward(const float2* __restrict__ W, const float2* __restrict__ tw, const S* __restrict__ g, S* __restrict__ gk,
              const float2* __restrict__ kspec, float2* __restrict__ sums, int B, int C, int T) {
  extern __shared__ float2 buf[];
  const Half h = half_for(T);
  const int c = blockIdx.x / B, b = blockIdx.x % B;
  const size_t row = ((size_t)b * C + c) * T;
  const float2* K = kspec + ((size_t)b * C + c) * (h.M + 1);
  float2* Sc = sums + (size_t)c * (h.M + 1);
  load_packed(buf, g + row, 1, h);
  __syncthreads();
  fft_inplace<-1, true, false>(buf, tw, h);
  for (int f = threadIdx.x; 2 * f <= h.M; f += blockDim.x) {
    float2 lo, hi;
    unpack(buf[pad(f)], buf[pad((h.M - f) % h.M)], tw[f], lo, hi);
    atomic_add(Sc + f, cmul_conj(K[f], lo));
    if (h.M - f != f) atomic_add(Sc + h.M - f, cmul_conj(K[h.M - f], conj(hi)));
  }
  // (that pass only read buf, each thread its own pairs, which multiply_packed takes again)
  multiply_packed<true>(buf, W + (size_t)c * (h.M + 1), tw, h);
  fft_inplace<1, false, true>(buf, tw, h);
  store_packed(gk + row, 1, buf, 0.0f, h);
}

// gw[c, T-1-j] = IFFT(S[c])[j]: pack, invert.
template <typename S>
__global__ void __launch_bounds__(LONG_THREADS)
long_gw(const float2* __restrict__ sums, const float2* __restrict__ tw, S* __restrict__ gw, int C, int T) {
  extern __shared__ float2 buf[];
  const Half h = half_for(T);
  const int c = blockIdx.x;
  const float2* Sc = sums + (size_t)c * (h.M + 1);
  for (int a = threadIdx.x; a < h.M; a += blockDim.x)
    buf[pad(a)] = pack(Sc[a], conj(Sc[h.M - a]), tw[a]);  // S[a+M] = conj(S[M-a])
  __syncthreads();
  fft_inplace<1, false, true>(buf, tw, h);
  store_packed(gw + (size_t)c * T + (T - 1), -1, buf, 0.0f, h);
}

// tw[m] = exp(-2πi m/N) for m <= M: the passes' and the packing's twiddles.
__global__ void long_twiddles(float2* __restrict__ tw, int M, int N) {
  fill_twiddles(tw, blockIdx.x * blockDim.x + threadIdx.x, M + 1, gridDim.x * blockDim.x, N);
}

size_t long_smem(int T) { return (size_t)padded(half_for(T).M) * sizeof(float2); }
int long_threads(int T) { return half_for(T).M / PER_THREAD; }

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

template <typename S>
cudaError_t allow_all() {
  cudaError_t err;
  if ((err = allow_long_smem(long_spectrum<S>)) != cudaSuccess) return err;
  if ((err = allow_long_smem(long_forward<S>)) != cudaSuccess) return err;
  if ((err = allow_long_smem(long_row_spectrum<S>)) != cudaSuccess) return err;
  if ((err = allow_long_smem(long_backward<S>)) != cudaSuccess) return err;
  return allow_long_smem(long_gw<S>);
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

template <typename S>
cudaError_t forward(const S* w, const S* k, S* out, float eps, float* scratch, int B, int C, int T,
                    cudaStream_t stream) {
  if (scratch == nullptr) return cudaErrorInvalidValue;  // sized by timex_fft_long_scratch
  cudaError_t err = allow_all<S>();
  if (err != cudaSuccess) return err;
  float2* W = reinterpret_cast<float2*>(scratch);
  const float2* tw = twiddles(scratch, C, T, stream);
  const int threads = long_threads(T);
  const size_t smem = long_smem(T);
  long_spectrum<S><<<C, threads, smem, stream>>>(w, tw, W, T);
  long_forward<S><<<(unsigned)((size_t)B * C), threads, smem, stream>>>(W, tw, k, out, eps, B, C, T);
  return cudaGetLastError();
}

template <typename S>
cudaError_t backward(const S* w, const S* k, const S* g, S* gw, S* gk, float* scratch, int B, int C, int T,
                     cudaStream_t stream) {
  if (scratch == nullptr) return cudaErrorInvalidValue;
  cudaError_t err = allow_all<S>();
  if (err != cudaSuccess) return err;
  const int threads = long_threads(T);
  const size_t smem = long_smem(T), rows = (size_t)B * C;
  float2* W = reinterpret_cast<float2*>(scratch);
  const float2* tw = twiddles(scratch, C, T, stream);
  float2* sums = reinterpret_cast<float2*>(scratch + spectrum_floats(C, T) + twiddle_floats(T));
  float2* kspec = sums + spectrum_floats(C, T) / 2;
  cudaError_t zeroed = cudaMemsetAsync(sums, 0, spectrum_floats(C, T) * sizeof(float), stream);
  if (zeroed != cudaSuccess) return zeroed;
  long_spectrum<S><<<C, threads, smem, stream>>>(w, tw, W, T);
  long_row_spectrum<S><<<(unsigned)rows, threads, smem, stream>>>(k, tw, kspec, B, C, T);
  long_backward<S><<<(unsigned)rows, threads, smem, stream>>>(W, tw, g, gk, kspec, sums, B, C, T);
  long_gw<S><<<C, threads, smem, stream>>>(sums, tw, gw, C, T);
  return cudaGetLastError();
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
    return forward((const S*)w, (const S*)k, (S*)out, eps, scratch, B, C, T, stream);
  });
}

cudaError_t timex_fft_long_backward(TimexDtype dtype, const void* w, const void* k, const void* g, void* gw,
                                    void* gk, float* scratch, int B, int C, int T, cudaStream_t stream) {
  return with_storage(dtype, [&](auto tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    return backward((const S*)w, (const S*)k, (const S*)g, (S*)gw, (S*)gk, scratch, B, C, T, stream);
  });
}
