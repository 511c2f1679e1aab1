// Checks timex-wgmma's forward or gk (kernels/timex/timex_wgmma.cu: TMA, mbarriers, wgmma from registers,
// persistent blocks with a second buffer) on the emulator: random bf16 or f16 k in [-1, 1] and w in (0, 1],
// out filled with NaN first, against float64 direct sums by ‖out − ref‖ / ‖ref‖ (the family's tolerance:
// 1e-5 plus 4 units of roundoff), under two schedules that must also agree bit for bit (TMA boxes and wgmma
// products landing as late as they may, or at their issue). On the emulator the launcher takes 3 slots,
// so every block takes several items and the second buffer is used.
//
// usage: timex_wgmma_check f16|bf16 B C T [fwd|gk]   (gk: k plays g, and gk = G . Wb of timex.h)
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
}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) return fprintf(stderr, "usage: timex_wgmma_check f16|bf16 B C T [fwd|gk]\n"), 2;
  const bool f16 = std::string(argv[1]) == "f16", gk = argc > 5 && std::string(argv[5]) == "gk";
  const int B = atoi(argv[2]), C = atoi(argv[3]), T = atoi(argv[4]);
  const double tolerance = 1e-5 + 4 * (f16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8));
  if (const char* why = timex_wgmma_unsupported(B, C, T)) return printf("unsupported: %s\n", why), 2;
  std::mt19937 gen(B * 7919 + C * 104729 + T);
  std::uniform_real_distribution<float> sym(-1.0f, 1.0f), pos(0.0f, 1.0f);
  Half16 k((size_t)B * C * T, f16), w((size_t)C * T, f16);
  for (size_t i = 0; i < (size_t)B * C * T; ++i) k.set(i, sym(gen));
  for (size_t i = 0; i < (size_t)C * T; ++i) w.set(i, 1.0f - pos(gen));
  const float eps = 0.25f;
  std::vector<double> ref((size_t)B * C * T);
  for (int b = 0; b < B; ++b)
    for (int c = 0; c < C; ++c)
      for (int t = 0; t < T; ++t) {
        double sum = gk ? 0.0 : eps;
        if (gk)
          for (int s = t; s < T; ++s) sum += w.get((size_t)c * T + T - 1 - (s - t)) * k.get(((size_t)b * C + c) * T + s);
        else
          for (int u = 0; u <= t; ++u) sum += w.get((size_t)c * T + T - 1 - (t - u)) * k.get(((size_t)b * C + c) * T + u);
        ref[((size_t)b * C + c) * T + t] = sum;
      }
  const auto& schedules = emu::hopper_schedules;
  std::vector<Half16> outs;
  bool ok = true;
  for (int s = 0; s < 2; ++s) {
    emu::schedule = schedules[s];
    outs.emplace_back((size_t)B * C * T, f16);
    const TimexDtype dtype = f16 ? TIMEX_F16 : TIMEX_BF16;
    void* out = outs.back().bits.data();
    const cudaError_t err = gk ? timex_wgmma_gk(dtype, w.bits.data(), k.bits.data(), out, B, C, T, nullptr)
                               : timex_wgmma_forward(dtype, w.bits.data(), k.bits.data(), out, eps, B, C, T, nullptr);
    if (err != cudaSuccess) {
      printf("schedule %d: launch error %d\n", s, err);
      ok = false;
      continue;
    }
    double num = 0, den = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      const double d = outs.back().get(i) - ref[i];
      num += d * d;
      den += ref[i] * ref[i];
    }
    const double rel = std::isnan(num) ? INFINITY : std::sqrt(num / den);
    printf("schedule %d: %s %s B=%d C=%d T=%d error %.3g (tolerance %.3g)\n", s, gk ? "gk" : "forward", f16 ? "f16" : "bf16", B, C, T, rel, tolerance);
    ok &= rel <= tolerance;
  }
  const bool same = outs.size() == 2 && outs[0].bits == outs[1].bits;
  printf("schedules agree bit for bit: %s\nRESULT %s\n", same ? "yes" : "NO", ok && same ? "OK" : "FAIL");
  return ok && same ? 0 : 1;
}
