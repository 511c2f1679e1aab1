// Complex arithmetic and in-register DFTs shared by the on-chip FFTs of timex_fft.cu,
// timex_fft_warp.cu and timex_fft_long.cu (float2 = one complex number).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "timex.h"

namespace timex_fft {

__device__ __forceinline__ int pad(int i) { return i + (i >> 4); }
__device__ __forceinline__ float2 cmul(float2 a, float2 b) {
  return make_float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}
__device__ __forceinline__ float2 cmul_conj(float2 a, float2 b) {  // conj(a) * b
  return make_float2(a.x * b.x + a.y * b.y, a.x * b.y - a.y * b.x);
}
__device__ __forceinline__ float2 add(float2 a, float2 b) { return make_float2(a.x + b.x, a.y + b.y); }
// *to += v for a complex number in global or shared memory: one vector atomic from sm_90 on, two
// scalar ones before it (atomicAdd(float2*) exists only there)
__device__ __forceinline__ void atomic_add(float2* to, float2 v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(to, v);
#else
  atomicAdd(&to->x, v.x);
  atomicAdd(&to->y, v.y);
#endif
}
__device__ __forceinline__ float2 sub(float2 a, float2 b) { return make_float2(a.x - b.x, a.y - b.y); }
// times SIGN·i
template <int SIGN>
__device__ __forceinline__ float2 rot(float2 a) {
  return SIGN > 0 ? make_float2(-a.y, a.x) : make_float2(a.y, -a.x);
}

// In-register DFTs, X[q] = Σ_r v[r] exp(SIGN·2πi·r·q/R), natural order in and out.
template <int SIGN>
__device__ __forceinline__ void dft2(float2& a, float2& b) {
  const float2 t = a;
  a = add(t, b);
  b = sub(t, b);
}

template <int SIGN>
__device__ __forceinline__ void dft4(float2& v0, float2& v1, float2& v2, float2& v3) {
  const float2 a = add(v0, v2), b = sub(v0, v2), c = add(v1, v3), d = rot<SIGN>(sub(v1, v3));
  v0 = add(a, c);
  v1 = add(b, d);
  v2 = sub(a, c);
  v3 = sub(b, d);
}

template <int R, int SIGN>
__device__ __forceinline__ void dft(float2 (&v)[R]) {
  if constexpr (R == 2) {
    dft2<SIGN>(v[0], v[1]);
  } else if constexpr (R == 3) {  // X1,2 = a - (b+c)/2 ± SIGN·i·(√3/2)(b - c)
    const float2 s = add(v[1], v[2]);
    const float2 m = make_float2(v[0].x - 0.5f * s.x, v[0].y - 0.5f * s.y);
    const float2 d = rot<SIGN>(sub(v[1], v[2]));
    const float r = 0.86602540378443865f;
    v[0] = add(v[0], s);
    v[1] = make_float2(m.x + r * d.x, m.y + r * d.y);
    v[2] = make_float2(m.x - r * d.x, m.y - r * d.y);
  } else if constexpr (R == 4) {
    dft4<SIGN>(v[0], v[1], v[2], v[3]);
  } else {  // R == 8: two DFT4s of the even and odd samples, then one radix-2 step
    dft4<SIGN>(v[0], v[2], v[4], v[6]);
    dft4<SIGN>(v[1], v[3], v[5], v[7]);
    const float h = 0.70710678118654752f;
    const float2 t0 = v[1];
    const float2 t1 = cmul(v[3], make_float2(h, SIGN * h));
    const float2 t2 = rot<SIGN>(v[5]);
    const float2 t3 = cmul(v[7], make_float2(-h, SIGN * h));
    const float2 e0 = v[0], e1 = v[2], e2 = v[4], e3 = v[6];
    v[0] = add(e0, t0);
    v[1] = add(e1, t1);
    v[2] = add(e2, t2);
    v[3] = add(e3, t3);
    v[4] = sub(e0, t0);
    v[5] = sub(e1, t1);
    v[6] = sub(e2, t2);
    v[7] = sub(e3, t3);
  }
}


// cos and sin of 2π e / R in float64, by their Taylor series at compile time (the in-register
// DFTs' constant twiddles; sincospi on constants is not folded by nvcc).
constexpr double turn_taylor(double x, bool sine) {
  double term = sine ? x : 1.0, sum = term;
  for (int n = sine ? 1 : 0; n < 60; n += 2) {
    term *= -x * x / ((n + 1.0) * (n + 2.0));
    sum += term;
  }
  return sum;
}

template <int R>
struct Cis {  // re[e] + i im[e] = exp(2πi e / R)
  float re[R], im[R];
  constexpr Cis() : re(), im() {
    for (int e = 0; e < R; ++e) {
      const double x = 2.0 * 3.14159265358979323846 * (2 * e < R ? e : e - R) / R;  // in [-π, π)
      re[e] = (float)turn_taylor(x, false);
      im[e] = (float)turn_taylor(x, true);
    }
  }
};

// v · exp(SIGN 2πi e / R) for a rotation e / R that is a constant once loops are unrolled: the
// multiples of π/4 cost swaps, negations or two products; the others one complex product.
template <int R, int SIGN>
__device__ __forceinline__ float2 turn(float2 v, int e) {
  e %= R;
  if (e == 0) return v;
  if ((8 * e) % R == 0) {
    const float h = 0.70710678118654752f;
    switch (8 * e / R) {
      case 1: return make_float2(h * (v.x - SIGN * v.y), h * (v.y + SIGN * v.x));
      case 2: return rot<SIGN>(v);
      case 3: return make_float2(-h * (v.x + SIGN * v.y), h * (SIGN * v.x - v.y));
      case 4: return make_float2(-v.x, -v.y);
      case 5: return make_float2(h * (SIGN * v.y - v.x), -h * (v.y + SIGN * v.x));
      case 6: return rot<-SIGN>(v);
      default: return make_float2(h * (v.x + SIGN * v.y), h * (v.y - SIGN * v.x));
    }
  }
  constexpr Cis<R> cis{};
  return cmul(v, make_float2(cis.re[e], SIGN * cis.im[e]));
}

template <int R, int SIGN>
__device__ __forceinline__ void dft_any(float2 (&v)[R]);

// The second step of a radix-(A·B) DFT, u[a][c] holding the A DFTs of size B: the turns
// exp(SIGN 2πi a·c/(A·B)), then B DFTs of size A over a, into v[c + B·d].
template <int A, int B, int SIGN>
__device__ __forceinline__ void dft_combine(float2 (&u)[A][B], float2 (&v)[A * B]) {
#pragma unroll
  for (int a = 1; a < A; ++a) {
#pragma unroll
    for (int c = 1; c < B; ++c) u[a][c] = turn<A * B, SIGN>(u[a][c], a * c);
  }
#pragma unroll
  for (int c = 0; c < B; ++c) {
    float2 t[A];
#pragma unroll
    for (int a = 0; a < A; ++a) t[a] = u[a][c];
    dft_any<A, SIGN>(t);
#pragma unroll
    for (int d = 0; d < A; ++d) v[c + B * d] = t[d];
  }
}

// The radix-R DFT in registers for any R made of 2, 3, 4 and 8 (6, 12, 16, 24, 32, 64, ...): with
// R = A·B, n = a + A·b and q = c + B·d, X[c + B·d] = Σ_a exp(SIGN 2πi a·d/A) · exp(SIGN 2πi a·c/R) ·
// (Σ_b v[a + A·b] exp(SIGN 2πi b·c/B)): A DFTs of size B, the turns, then B DFTs of size A.
template <int R, int SIGN>
__device__ __forceinline__ void dft_any(float2 (&v)[R]) {
  if constexpr (R == 1) {
  } else if constexpr (R == 2 || R == 3 || R == 4 || R == 8) {
    dft<R, SIGN>(v);
  } else {
    constexpr int A = R == 16 ? 4 : R % 8 == 0 ? 8 : R % 4 == 0 ? 4 : R % 2 == 0 ? 2 : 3;
    constexpr int B = R / A;
    static_assert(A * B == R && B > 1, "radix made of 2, 3, 4 and 8");
    float2 u[A][B];
#pragma unroll
    for (int a = 0; a < A; ++a) {
#pragma unroll
      for (int b = 0; b < B; ++b) u[a][b] = v[a + A * b];
      dft_any<B, SIGN>(u[a]);
    }
    dft_combine<A, B, SIGN>(u, v);
  }
}

// dft_any<R> for R a power of two when v[r] = 0 for r >= R/2 (the upper half is not read): the first
// pass of a transform of a zero-padded row (T <= N/2 always, as N >= 2T-1 is even).
template <int R, int SIGN>
__device__ __forceinline__ void dft_half_in(float2 (&v)[R]) {
  static_assert((R & (R - 1)) == 0 && R >= 2, "a power of two");
  if constexpr (R == 2) {
    v[1] = v[0];
  } else if constexpr (R == 4) {  // dft4 with v2 = v3 = 0
    const float2 a = v[0], c = v[1], d = rot<SIGN>(v[1]);
    v[0] = add(a, c);
    v[1] = add(a, d);
    v[2] = sub(a, c);
    v[3] = sub(a, d);
  } else {
    constexpr int A = R == 16 ? 4 : R % 8 == 0 && R > 8 ? 8 : 2;
    constexpr int B = R / A;  // n = a + A·b < R/2 exactly when b < B/2
    float2 u[A][B];
#pragma unroll
    for (int a = 0; a < A; ++a) {
#pragma unroll
      for (int b = 0; b < B / 2; ++b) u[a][b] = v[a + A * b];
      dft_half_in<B, SIGN>(u[a]);
    }
    dft_combine<A, B, SIGN>(u, v);
  }
}

// One Stockham butterfly: v[r] *= w1^r (when `twiddled`), then the radix-R DFT, with w1 =
// exp(SIGN 2πi k / (Ns R)) from the caller; its powers by multiplication.
template <int R, int SIGN>
__device__ __forceinline__ void butterfly(float2 (&v)[R], float2 w1, bool twiddled) {
  if (twiddled) {
    float2 w = w1;
#pragma unroll
    for (int r = 1; r < R; ++r) {
      v[r] = cmul(v[r], w);
      w = cmul(w, w1);
    }
  }
  dft<R, SIGN>(v);
}

// exp(SIGN 2πi m / N) from a table of exp(-2πi m / N). In timex_fft_long.cu a lookup replaced one
// accurate sincospif per butterfly (the FFTs are bound by instruction issue, ncu 2026-11-23): 7 %
// faster at T = 4096.
template <int SIGN>
__device__ __forceinline__ float2 twiddle_from(const float2* table, int m) {
  const float2 t = table[m];
  return SIGN < 0 ? t : make_float2(t.x, -t.y);
}

// x, as a value nvcc cannot prove equal to anything computed before: what is derived from it (loads,
// addresses) is derived again rather than kept live from an earlier use of x. No code is emitted.
template <typename X>
__device__ __forceinline__ X opaque(X x) {
#ifdef __CUDACC__  // the CPU emulator's compiler has no PTX registers, and nothing to hide
  if constexpr (sizeof(X) == 8) {
    asm volatile("" : "+l"(x));
  } else {
    asm volatile("" : "+r"(x));
  }
#endif
  return x;
}

// table[m] = exp(-2πi m / N) for m in [first, count), step apart, computed in float64.
__device__ __forceinline__ void fill_twiddles(float2* table, int first, int count, int step, int N) {
  for (int m = first; m < count; m += step) {
    double s, c;
    sincospi(-2.0 * m / N, &s, &c);
    table[m] = make_float2((float)c, (float)s);
  }
}

// Shared-memory index padded by one element every 16 (strided accesses avoid bank conflicts), and
// the padded length of a buffer of n elements.
__host__ __device__ inline int padded(int n) { return n + (n >> 4); }

// The transform size for a causal convolution of length T: the smallest 2^p or 3·2^p that is at
// least 2T-1 (zero padding keeps the circular wrap-around out of the outputs).
struct Plan {
  int N;      // transform size: 2^log2m, or 3·2^log2m when three
  int log2m;
  bool three;
};

__host__ __device__ inline Plan plan_for(int T) {
  const int need = 2 * T - 1;
  for (int log2m = 3;; ++log2m) {
    if ((1 << log2m) >= need) return {1 << log2m, log2m, false};
    if (3 << (log2m - 1) >= need) return {3 << (log2m - 1), log2m - 1, true};
  }
}


// Storage types of inputs and outputs (float, __nv_bfloat16, __half): every sum is in float32, and
// a value is rounded to its storage type once, when stored.
__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
template <typename S>
__device__ __forceinline__ S from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <>
__device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }


// f(S* tag) for the storage type S of `dtype`: `using S = std::remove_pointer_t<decltype(tag)>`.
template <typename F>
cudaError_t with_storage(TimexDtype dtype, F&& f) {
  switch (dtype) {
    case TIMEX_F32:
      return f(static_cast<float*>(nullptr));
    case TIMEX_BF16:
      return f(static_cast<__nv_bfloat16*>(nullptr));
    case TIMEX_F16:
      return f(static_cast<__half*>(nullptr));
  }
  return cudaErrorInvalidValue;
}

}  // namespace timex_fft
