// Checks timex-wgmma's forward or gk (kernels/timex/timex_wgmma.cu: TMA, mbarriers, wgmma from registers,
// persistent blocks with a second buffer), or its gw (timex_wgmma_gw.cu: wgmma from shared memory, both
// operands transposed) on the emulator: random bf16 or f16 k and g in [-1, 1] and w in (0, 1], the output
// filled with NaN first, against float64 direct sums by ‖out − ref‖ / ‖ref‖ (the family's tolerance: 1e-5
// plus 4 units of roundoff), under two schedules that must also agree bit for bit (TMA boxes and wgmma
// products landing as late as they may, or at their issue). On the emulator the forward's launcher takes 5
// slots, so every block takes several items and the second buffer is used.
//
// usage: timex_wgmma_check f16|bf16 B C T [fwd|gk|gw]   (gk: k plays g in gk = G . Wb of timex.h; gw: from k
// and a second random g, of w's shape (C, T))
// Prints a line per schedule, one on the bitwise comparison, then RESULT OK (exit 0) or RESULT FAIL (1).
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "timex.h"

namespace {
struct Half16 {  // 16-bit values, created as 0xff bytes (NaN)
  Half16(size_t n, bool f16) : f16(f16), bits((n + 32) & ~size_t(31), 0xffff) {}
  bool f16;
  std::vector<uint16_t> bits;
  double get(size_t i) const { return f16 ? __half::to_float(bits[i]) : __nv_bfloat16::to_float(bits[i]); }
  void set(size_t i, float x) { bits[i] = f16 ? __half(x).x : __nv_bfloat16(x).x; }
};

enum class Direction { Forward, Gk, Gw };

// float64 sums, and the sums of the terms' magnitudes: out = eps + K . Wf, gk = G . Wb (x plays g),
// gw[c, T-1-d] = sum_b sum_u g[b, u+d] k[b, u]
struct Reference {
  std::vector<double> sum, magnitude;
};

Reference reference(Direction dir, const Half16& w, const Half16& x, const Half16& g, float eps, int B, int C, int T) {
  const size_t n = dir == Direction::Gw ? (size_t)C * T : (size_t)B * C * T;
  const double first = dir == Direction::Forward ? eps : 0.0;
  Reference ref{std::vector<double>(n, first), std::vector<double>(n, std::fabs(first))};
  const auto add = [&](size_t i, double term) {
    ref.sum[i] += term;
    ref.magnitude[i] += std::fabs(term);
  };
  for (int b = 0; b < B; ++b)
    for (int c = 0; c < C; ++c) {
      const size_t row = ((size_t)b * C + c) * T;
      for (int t = 0; t < T; ++t)
        for (int s = 0; s < T; ++s) {
          if (dir == Direction::Forward && s <= t) add(row + t, w.get((size_t)c * T + T - 1 - (t - s)) * x.get(row + s));
          if (dir == Direction::Gk && s >= t) add(row + t, w.get((size_t)c * T + T - 1 - (s - t)) * x.get(row + s));
          if (dir == Direction::Gw && s >= t) add((size_t)c * T + T - 1 - (s - t), g.get(row + s) * x.get(row + t));
        }
    }
  return ref;
}
}  // namespace

// A checker binary links one kernel file: the functions of the other are null here (weak).
__attribute__((weak)) cudaError_t timex_wgmma_forward(TimexDtype, const void*, const void*, void*, float, int, int, int,
                                                      cudaStream_t);
__attribute__((weak)) cudaError_t timex_wgmma_gk(TimexDtype, const void*, const void*, void*, int, int, int, cudaStream_t);
__attribute__((weak)) cudaError_t timex_wgmma_gw(TimexDtype, const void*, const void*, void*, int, int, int, cudaStream_t);


int main(int argc, char** argv) {
  if (argc < 5) return fprintf(stderr, "usage: timex_wgmma_check f16|bf16 B C T [fwd|gk|gw]\n"), 2;
  const bool f16 = std::string(argv[1]) == "f16";
  const std::string name = argc > 5 ? argv[5] : "fwd";
  const Direction dir = name == "gk" ? Direction::Gk : name == "gw" ? Direction::Gw : Direction::Forward;
  const int B = atoi(argv[2]), C = atoi(argv[3]), T = atoi(argv[4]);
  const double tolerance = 1e-5 + 4 * (f16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8));
  std::mt19937 gen(B * 7919 + C * 104729 + T);
  std::uniform_real_distribution<float> sym(-1.0f, 1.0f), pos(0.0f, 1.0f);
  Half16 k((size_t)B * C * T, f16), g((size_t)B * C * T, f16), w((size_t)C * T, f16);
  for (size_t i = 0; i < (size_t)B * C * T; ++i) k.set(i, sym(gen));
  for (size_t i = 0; i < (size_t)B * C * T; ++i) g.set(i, sym(gen));
  for (size_t i = 0; i < (size_t)C * T; ++i) w.set(i, 1.0f - pos(gen));
  const float eps = 0.25f;
  const Reference reference_sums = reference(dir, w, k, g, eps, B, C, T);
  const std::vector<double>& ref = reference_sums.sum;
  // each element too: within half a unit of the output's precision of the exact sum, plus 1e-4 of its terms'
  // magnitudes for the float32 sums (a lag or row left out, or added twice, fails here if not in the norm)
  const double half_unit = std::ldexp(1.0, f16 ? -11 : -8);
  const auto& schedules = emu::hopper_schedules;
  std::vector<Half16> outs;
  bool ok = true;
  for (int s = 0; s < 2; ++s) {
    emu::schedule = schedules[s];
    outs.emplace_back(ref.size(), f16);
    const TimexDtype dtype = f16 ? TIMEX_F16 : TIMEX_BF16;
    void* out = outs.back().bits.data();
    if ((dir == Direction::Gw ? (void*)timex_wgmma_gw : dir == Direction::Gk ? (void*)timex_wgmma_gk
                                                                              : (void*)timex_wgmma_forward) == nullptr)
      return printf("%s is not in the kernel file this binary links\n", name.c_str()), 2;
    const cudaError_t err =
        dir == Direction::Gw   ? timex_wgmma_gw(dtype, k.bits.data(), g.bits.data(), out, B, C, T, nullptr)
        : dir == Direction::Gk ? timex_wgmma_gk(dtype, w.bits.data(), k.bits.data(), out, B, C, T, nullptr)
                               : timex_wgmma_forward(dtype, w.bits.data(), k.bits.data(), out, eps, B, C, T, nullptr);
    if (err != cudaSuccess) {
      printf("schedule %d: launch error %d\n", s, err);
      ok = false;
      continue;
    }
    double num = 0, den = 0;
    size_t outside = 0, first_outside = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      const double d = outs.back().get(i) - ref[i];
      num += d * d;
      den += ref[i] * ref[i];
      if (!(std::fabs(d) <= half_unit * std::fabs(ref[i]) + 1e-4 * reference_sums.magnitude[i]) && outside++ == 0)
        first_outside = i;
    }
    const double rel = std::isnan(num) ? INFINITY : std::sqrt(num / den);
    printf("schedule %d: %s %s B=%d C=%d T=%d error %.3g (tolerance %.3g); %zu elements outside their own bound",
           s, name.c_str(), f16 ? "f16" : "bf16", B, C, T, rel, tolerance, outside);
    if (outside) printf(" (first: %zu, %g against %g)", first_outside, outs.back().get(first_outside), ref[first_outside]);
    printf("\n");
    ok &= rel <= tolerance && outside == 0;
  }
  const bool same = outs.size() == 2 && outs[0].bits == outs[1].bits;
  printf("schedules agree bit for bit: %s\nRESULT %s\n", same ? "yes" : "NO", ok && same ? "OK" : "FAIL");
  return ok && same ? 0 : 1;
}
