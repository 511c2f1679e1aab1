// timex-fft: TimeX as products of spectra, with every FFT done on chip.
//
// Per channel c (split over a few thread blocks along the batch), with N the smallest size 2^p or
// 3·2^p that is at least 2T-1 (zero padding keeps the circular wrap-around out of the outputs):
//   forward   out = eps + IFFT(WW · Z)          Z = FFT(k_b + i k_b'), two batch rows per FFT
//   backward  gk  = IFFT(conj(WW) · G)          G = FFT(g_b + i g_b')
//             gw[c, T-1-j] = IFFT(S)[j]         S = Σ_b conj(K_b) G_b, summed over the batch in the
//                                               frequency domain, K_b and G_b split out of the packed
//                                               spectra by their conjugate symmetry
// WW is the spectrum of ww[j] = w[c, T-1-j]. The FFT is a Stockham radix-8 (then 4 or 2, then 3)
// in shared memory: no bit reversal, each pass reads one buffer and writes the other. A pass's
// first twiddle comes from sincospif, the others are its powers. Buffer indices are padded by one
// element every 16 so the strided writes of the first passes avoid bank conflicts.
#include <map>
#include <mutex>
#include <tuple>

#include "fft_math.cuh"
#include "timex.h"

namespace {

using namespace timex_fft;

constexpr int FFT_THREADS = 256;

// One Stockham pass: Ns (a power of two) points already transformed per sub-sequence, radix R.
// The first twiddle comes from sincospif: a table in shared memory (as timex_fft_long.cu has in
// global memory) made T <= 1024 up to 17 % slower, by the occupancy its bytes cost.
template <int R, int SIGN>
__device__ __forceinline__ void fft_pass(const float2* src, float2* dst, int N, int Ns) {
  const int stride = N / R;
  const float turn = 2.0f * SIGN / (Ns * R);
  for (int j = threadIdx.x; j < stride; j += blockDim.x) {
    const int k = j & (Ns - 1);
    float2 v[R];
#pragma unroll
    for (int r = 0; r < R; ++r) v[r] = src[pad(j + r * stride)];
    float2 w1;
    sincospif(turn * k, &w1.y, &w1.x);  // exp(SIGN 2πi k / (Ns R))
    butterfly<R, SIGN>(v, w1, Ns > 1);
    const int base = (j - k) * R + k;
#pragma unroll
    for (int q = 0; q < R; ++q) dst[pad(base + q * Ns)] = v[q];
  }
}

template <int R, int SIGN>
__device__ __forceinline__ void pass_and_swap(float2*& a, float2*& b, int N, int& Ns) {
  fft_pass<R, SIGN>(a, b, N, Ns);
  __syncthreads();
  float2* t = a;
  a = b;
  b = t;
  Ns *= R;
}

// FFT of a (padded layout), using b as the other buffer; returns the buffer that holds the
// result. Radix 8 while it divides the power-of-two part, then 4 or 2, then 3.
template <int SIGN>
__device__ float2* fft(float2* a, float2* b, const Plan& p) {
  int Ns = 1;
  for (int i = 0; i < p.log2m / 3; ++i) pass_and_swap<8, SIGN>(a, b, p.N, Ns);
  if (p.log2m % 3 == 1) pass_and_swap<2, SIGN>(a, b, p.N, Ns);
  if (p.log2m % 3 == 2) pass_and_swap<4, SIGN>(a, b, p.N, Ns);
  if (p.three) pass_and_swap<3, SIGN>(a, b, p.N, Ns);
  return a;
}

// Shared memory: two FFT buffers (padded), WW, and for the backward S and one stored spectrum.
struct Smem {
  float2 *a, *b, *ww, *s, *zk;
};

__device__ Smem carve(float2* base, int N, bool backward) {
  Smem m;
  m.a = base;
  m.b = m.a + padded(N);
  m.ww = m.b + padded(N);
  m.s = backward ? m.ww + N : nullptr;
  m.zk = backward ? m.s + N : nullptr;
  return m;
}

// x[n] = (re[n], im[n]) for n < T (im may be absent), zero up to N.
template <typename S>
__device__ void load_pair(float2* x, const S* re, const S* im, int T, int N) {
  for (int n = threadIdx.x; n < N; n += blockDim.x)
    x[pad(n)] = n < T ? make_float2(to_float(re[n]), im ? to_float(im[n]) : 0.0f) : make_float2(0.0f, 0.0f);
}

// WW = FFT(ww), ww[j] = w[c, T-1-j], into m.ww (natural, unpadded).
template <typename S>
__device__ void weight_spectrum(const Smem& m, const S* wr, int T, Plan p) {
  for (int n = threadIdx.x; n < p.N; n += blockDim.x)
    m.a[pad(n)] = make_float2(n < T ? to_float(wr[T - 1 - n]) : 0.0f, 0.0f);
  __syncthreads();
  const float2* spec = fft<-1>(m.a, m.b, p);
  for (int f = threadIdx.x; f < p.N; f += blockDim.x) m.ww[f] = spec[pad(f)];
  __syncthreads();
}

// The block's share of the batch: row pairs [first, last) of ceil(B/2), split gridDim.y ways.
struct Pairs {
  int first, last;
};

__device__ Pairs my_pairs(int B) {
  const int pairs = (B + 1) / 2, per = (pairs + gridDim.y - 1) / gridDim.y;
  const int first = blockIdx.y * per;
  return {first, min(pairs, first + per)};
}

template <typename S>
__global__ void __launch_bounds__(FFT_THREADS)
fft_forward(const S* __restrict__ w, const S* __restrict__ k, S* __restrict__ out, float eps, int B, int C, int T) {
  extern __shared__ float2 smem2[];
  const Plan p = plan_for(T);
  const Smem m = carve(smem2, p.N, false);
  const int c = blockIdx.x;
  weight_spectrum(m, w + (size_t)c * T, T, p);
  const float scale = 1.0f / p.N;
  const Pairs mine = my_pairs(B);
  for (int pair = mine.first; pair < mine.last; ++pair) {
    const int b = 2 * pair;
    const bool two = b + 1 < B;
    const S* k0 = k + ((size_t)b * C + c) * T;
    load_pair(m.a, k0, two ? k0 + (size_t)C * T : nullptr, T, p.N);
    __syncthreads();
    float2* z = fft<-1>(m.a, m.b, p);
    float2* other = z == m.a ? m.b : m.a;
    for (int f = threadIdx.x; f < p.N; f += blockDim.x) z[pad(f)] = cmul(m.ww[f], z[pad(f)]);
    __syncthreads();
    const float2* y = fft<1>(z, other, p);
    S* o0 = out + ((size_t)b * C + c) * T;
    for (int t = threadIdx.x; t < T; t += blockDim.x) {
      const float2 v = y[pad(t)];
      o0[t] = from_float<S>(eps + v.x * scale);
      if (two) o0[(size_t)C * T + t] = from_float<S>(eps + v.y * scale);
    }
    __syncthreads();
  }
}

// conj(X1)·Y1 + conj(X2)·Y2 for the two real signals packed in each of X and Y, at bin f (with
// their values at bin -f): X1 = (X_f + conj(X_-f))/2, X2 = (X_f - conj(X_-f))/(2i).
__device__ __forceinline__ float2 packed_cross(float2 xf, float2 xn, float2 yf, float2 yn) {
  const float2 xn_c = make_float2(xn.x, -xn.y), yn_c = make_float2(yn.x, -yn.y);
  const float2 x1 = add(xf, xn_c), y1 = add(yf, yn_c);         // 2·X1, 2·Y1
  const float2 x2 = rot<-1>(sub(xf, xn_c)), y2 = rot<-1>(sub(yf, yn_c));  // 2·X2, 2·Y2
  const float2 s = add(cmul_conj(x1, y1), cmul_conj(x2, y2));
  return make_float2(0.25f * s.x, 0.25f * s.y);
}

// gk for the block's row pairs, and the block's share of gw: into float partial sums
// gw[blockIdx.y] (summed by the launcher) when the batch is split (G = float), else straight into gw.
template <typename S, typename G>
__global__ void __launch_bounds__(FFT_THREADS)
fft_backward(const S* __restrict__ w, const S* __restrict__ k, const S* __restrict__ g, G* __restrict__ gw,
             S* __restrict__ gk, int B, int C, int T) {
  extern __shared__ float2 smem2[];
  const Plan p = plan_for(T);
  const Smem m = carve(smem2, p.N, true);
  const int c = blockIdx.x;
  for (int f = threadIdx.x; f < p.N; f += blockDim.x) m.s[f] = make_float2(0.0f, 0.0f);
  weight_spectrum(m, w + (size_t)c * T, T, p);
  const float scale = 1.0f / p.N;
  const Pairs mine = my_pairs(B);
  for (int pair = mine.first; pair < mine.last; ++pair) {
    const int b = 2 * pair;
    const bool two = b + 1 < B;
    const size_t row = ((size_t)b * C + c) * T, next = (size_t)C * T;
    load_pair(m.a, k + row, two ? k + row + next : nullptr, T, p.N);
    __syncthreads();
    const float2* zk = fft<-1>(m.a, m.b, p);
    for (int f = threadIdx.x; f < p.N; f += blockDim.x) m.zk[f] = zk[pad(f)];
    __syncthreads();
    load_pair(m.a, g + row, two ? g + row + next : nullptr, T, p.N);
    __syncthreads();
    float2* zg = fft<-1>(m.a, m.b, p);
    float2* other = zg == m.a ? m.b : m.a;
    for (int f = threadIdx.x; f < p.N; f += blockDim.x) {
      const int n = f == 0 ? 0 : p.N - f;
      m.s[f] = add(m.s[f], packed_cross(m.zk[f], m.zk[n], zg[pad(f)], zg[pad(n)]));
    }
    __syncthreads();  // every bin -f was read before anyone overwrites it below
    for (int f = threadIdx.x; f < p.N; f += blockDim.x) zg[pad(f)] = cmul_conj(m.ww[f], zg[pad(f)]);
    __syncthreads();
    const float2* y = fft<1>(zg, other, p);
    for (int t = threadIdx.x; t < T; t += blockDim.x) {
      const float2 v = y[pad(t)];
      gk[row + t] = from_float<S>(v.x * scale);
      if (two) gk[row + next + t] = from_float<S>(v.y * scale);
    }
    __syncthreads();
  }
  for (int f = threadIdx.x; f < p.N; f += blockDim.x) m.a[pad(f)] = m.s[f];
  __syncthreads();
  const float2* r = fft<1>(m.a, m.b, p);
  G* dst = gw + ((size_t)blockIdx.y * C + c) * T;
  for (int j = threadIdx.x; j < T; j += blockDim.x) dst[T - 1 - j] = from_float<G>(r[pad(j)].x * scale);
}

// gw[i] = Σ_p part[p, i], rounded once to the storage type.
template <typename S>
__global__ void sum_parts(const float* __restrict__ part, S* __restrict__ gw, int P, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    float s = 0.0f;
    for (int p = 0; p < P; ++p) s += part[(size_t)p * n + i];
    gw[i] = from_float<S>(s);
  }
}

size_t smem_bytes(int T, bool backward) {
  const Plan p = plan_for(T);
  return (2 * (size_t)padded(p.N) + (backward ? 3 : 1) * (size_t)p.N) * sizeof(float2);
}

template <typename Kernel>
cudaError_t allow_smem(Kernel kernel, size_t bytes) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
}

// Resident blocks of `kernel` on the whole device at `bytes` of shared memory (0 when it cannot
// tell). The kernel's limit is raised to what the longest supported T needs, never to `bytes`:
// the limit is one per kernel, and lowering it for a short T would break a longer T whose count
// is already cached (seen when a multi-GPU run handed a worker T=1024, then T=64, then T=1024).
template <typename Kernel>
int resident_blocks(Kernel kernel, size_t bytes, bool backward) {
  int device = 0, sms = 0, per_sm = 0, optin = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) {
    return 0;
  }
  const size_t longest = smem_bytes(TIMEX_TMAX, backward);
  const size_t limit = longest < (size_t)optin ? longest : (size_t)optin;
  if (bytes > limit || allow_smem(kernel, limit) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, FFT_THREADS, bytes) != cudaSuccess) {
    return 0;
  }
  return sms * per_sm;
}

// Resident blocks per (device, kernel, T), asked of the occupancy API once: that query also raises
// the kernel's shared-memory limit, and neither belongs in every timed call.
template <typename Kernel>
int resident_for(Kernel kernel, int T, bool backward) {
  static std::mutex lock;
  static std::map<std::tuple<int, const void*, int>, int> known;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 0;
  const std::lock_guard<std::mutex> guard(lock);
  const auto key = std::make_tuple(device, reinterpret_cast<const void*>(kernel), T);
  auto it = known.find(key);
  if (it == known.end()) it = known.emplace(key, resident_blocks(kernel, smem_bytes(T, backward), backward)).first;
  return it->second;
}

// Blocks per channel: enough that the grid is about four waves of resident blocks (a single
// partial wave of whole channels would leave most SMs idle at the end), at most one per row pair.
int splits(int resident, int B, int C) {
  if (resident <= 0) return 1;
  const int pairs = (B + 1) / 2;
  const int want = (4 * resident + C - 1) / C;
  return want < 1 ? 1 : (want > pairs ? pairs : want);
}

template <typename S>
cudaError_t forward(const S* w, const S* k, S* out, float eps, int B, int C, int T, cudaStream_t stream) {
  const int resident = resident_for(fft_forward<S>, T, false);
  if (resident <= 0) return cudaErrorInvalidConfiguration;  // does not fit on this GPU
  fft_forward<S><<<dim3(C, splits(resident, B, C)), FFT_THREADS, smem_bytes(T, false), stream>>>(w, k, out, eps,
                                                                                                  B, C, T);
  return cudaGetLastError();
}

// Blocks per channel in the backward, for every storage type as for float (timex_fft_scratch sized
// the scratch by this count).
int backward_splits(int B, int C, int T) { return splits(resident_for(fft_backward<float, float>, T, true), B, C); }

// Split over the batch, each block's share of gw goes to float partial sums in scratch, summed once.
template <typename S>
cudaError_t backward(const S* w, const S* k, const S* g, S* gw, S* gk, float* scratch, int B, int C, int T,
                     cudaStream_t stream) {
  const int s = backward_splits(B, C, T);
  const size_t smem = smem_bytes(T, true);
  if (s == 1) {
    if (resident_for(fft_backward<S, S>, T, true) <= 0) return cudaErrorInvalidConfiguration;
    fft_backward<S, S><<<dim3(C, 1), FFT_THREADS, smem, stream>>>(w, k, g, gw, gk, B, C, T);
    return cudaGetLastError();
  }
  if (resident_for(fft_backward<S, float>, T, true) <= 0) return cudaErrorInvalidConfiguration;
  if (scratch == nullptr) return cudaErrorInvalidValue;  // sized by timex_fft_scratch
  fft_backward<S, float><<<dim3(C, s), FFT_THREADS, smem, stream>>>(w, k, g, scratch, gk, B, C, T);
  sum_parts<S><<<(unsigned)((C * (size_t)T + 255) / 256), 256, 0, stream>>>(scratch, gw, s, (size_t)C * T);
  return cudaGetLastError();
}

}  // namespace

size_t timex_fft_scratch(int B, int C, int T, bool backward) {
  if (T > TIMEX_TMAX) return timex_fft_long_scratch(B, C, T, backward);
  if (timex_fft_warp_takes(T, backward)) return timex_fft_warp_scratch(C, T, backward);
  const int s = backward ? backward_splits(B, C, T) : 1;
  return s > 1 ? (size_t)s * C * T : 0;
}

cudaError_t timex_fft_forward(TimexDtype dtype, const void* w, const void* k, void* out, float eps, float* scratch,
                              int B, int C, int T, cudaStream_t stream) {
  if (T > TIMEX_TMAX) return timex_fft_long_forward(dtype, w, k, out, eps, scratch, B, C, T, stream);
  if (timex_fft_warp_takes(T, false)) return timex_fft_warp_forward(dtype, w, k, out, eps, scratch, B, C, T, stream);
  return with_storage(dtype, [&](auto tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    return forward((const S*)w, (const S*)k, (S*)out, eps, B, C, T, stream);
  });
}

cudaError_t timex_fft_backward(TimexDtype dtype, const void* w, const void* k, const void* g, void* gw, void* gk,
                               float* scratch, int B, int C, int T, cudaStream_t stream) {
  if (T > TIMEX_TMAX) return timex_fft_long_backward(dtype, w, k, g, gw, gk, scratch, B, C, T, stream);
  if (timex_fft_warp_takes(T, true)) return timex_fft_warp_backward(dtype, w, k, g, gw, gk, scratch, B, C, T, stream);
  return with_storage(dtype, [&](auto tag) {
    using S = std::remove_pointer_t<decltype(tag)>;
    return backward((const S*)w, (const S*)k, (const S*)g, (S*)gw, (S*)gk, scratch, B, C, T, stream);
  });
}
