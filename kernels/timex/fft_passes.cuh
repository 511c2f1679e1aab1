// A transform held in the registers of a group of G threads (one warp in timex_fft_warp.cu, one
// thread block in timex_fft_long.cu): the N points live P = N/G per thread, thread `me` holding
// points me + G·m in register m. A pass of radix R is P/R butterflies per thread on values the thread
// already holds (butterfly j = me + G·i takes points j + r·N/R, which are its registers i + r·P/R),
// then one exchange through the group's shared-memory buffer puts the results back in that layout.
// So a transform is a few passes (radix 16, 16, 6 at N = 1536), index math folds to constants, and
// between passes the group only waits for itself.
#pragma once
#include "fft_math.cuh"

namespace timex_fft {

template <int... R>
struct Radices {};

struct WarpSync {
  static __device__ __forceinline__ void wait() { __syncwarp(); }
};
struct BlockSync {
  static __device__ __forceinline__ void wait() { __syncthreads(); }
};

// One pass of radix R over the group's N points, Ns points already transformed per sub-sequence;
// tw(m, N) = exp(SIGN 2πi m / N). HALF_IN: the points from N/2 on are zero (first pass only);
// HALF_OUT: only the points below N/2 are wanted (last pass only), so the others are neither
// computed nor exchanged. On return buf holds the pass's output too (natural order, padded).
template <int N, int G, int R, int Ns, int SIGN, bool HALF_IN, bool HALF_OUT, typename Sync, typename Tw>
__device__ __forceinline__ void group_pass(float2 (&v)[N / G], float2* buf, const Tw& tw, int me) {
  constexpr int P = N / G, BF = P / R;
  static_assert(P % R == 0, "a radix divides the points per thread");
  static_assert((Ns & (Ns - 1)) == 0, "only the last radix may be other than a power of two");
  static_assert(!HALF_IN || Ns == 1, "the zero half is the input's");
  static_assert(!HALF_OUT || Ns * R == N, "the wanted half is the output's");
#pragma unroll
  for (int i = 0; i < BF; ++i) {
    const int j = me + G * i;
    const int k = j & (Ns - 1);
    float2 u[R];
#pragma unroll
    for (int r = 0; r < (HALF_IN ? R / 2 : R); ++r) u[r] = v[i + r * BF];
    if constexpr (Ns > 1) {  // u[r] *= w^r, w = exp(SIGN 2πi k / (Ns R)), its powers by multiplication
      const float2 w1 = tw(k * (N / (Ns * R)), N);
      float2 w = w1;
#pragma unroll
      for (int r = 1; r < R; ++r) {
        u[r] = cmul(u[r], w);
        if (r + 1 < R) w = cmul(w, w1);
      }
    }
    if constexpr (HALF_IN) {
      dft_half_in<R, SIGN>(u);
    } else {
      dft_any<R, SIGN>(u);  // with HALF_OUT the unused half is dead code
    }
    const int base = (j - k) * R + k;
#pragma unroll
    for (int q = 0; q < (HALF_OUT ? R / 2 : R); ++q) buf[pad(base + q * Ns)] = u[q];
  }
  Sync::wait();
#pragma unroll
  for (int m = 0; m < (HALF_OUT ? P / 2 : P); ++m) v[m] = buf[pad(me + G * m)];
  Sync::wait();  // every thread has read before the next pass writes
}

template <int N, int G, int SIGN, bool HALF_IN, bool HALF_OUT, int Ns, typename Sync, typename Tw>
__device__ __forceinline__ void group_passes(float2 (&)[N / G], float2*, const Tw&, int, Radices<>) {}

template <int N, int G, int SIGN, bool HALF_IN, bool HALF_OUT, int Ns, typename Sync, typename Tw, int R,
          int... Rest>
__device__ __forceinline__ void group_passes(float2 (&v)[N / G], float2* buf, const Tw& tw, int me,
                                             Radices<R, Rest...>) {
  group_pass<N, G, R, Ns, SIGN, HALF_IN && Ns == 1, HALF_OUT && sizeof...(Rest) == 0, Sync>(v, buf, tw, me);
  group_passes<N, G, SIGN, HALF_IN, HALF_OUT, Ns * R, Sync>(v, buf, tw, me, Radices<Rest...>{});
}

// The N-point DFT (sign SIGN) of the group's values by the passes `Plan` (a Radices<...> whose
// product is N), natural order in and out. HALF_IN: points N/2.. are zero (need not be set);
// HALF_OUT: only points ..N/2 come out right.
template <int N, int G, int SIGN, bool HALF_IN, bool HALF_OUT, typename Plan, typename Sync, typename Tw>
__device__ __forceinline__ void group_fft(float2 (&v)[N / G], float2* buf, const Tw& tw, int me) {
  group_passes<N, G, SIGN, HALF_IN, HALF_OUT, 1, Sync>(v, buf, tw, me, Plan{});
}

}  // namespace timex_fft
