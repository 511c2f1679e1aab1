// Checks timex-fft's warp-held transforms (kernels/timex/timex_fft_warp.cu, 192 < T <= 1024, the
// backward to T = 768) and its long rows (timex_fft_long.cu, 1024 < T <= 16384) on the
// emulator: random inputs rounded to the dtype (uniform in [-1, 1] for k and g, w in (0, 1]),
// outputs and scratch filled with NaN first, out, gk and gw against float64 direct sums of the
// definitions in kernels/timex/timex.h, judged by ‖got − ref‖ / ‖ref‖ against the tolerance. Two
// schedules (warps forward, warps in reverse) must agree bit for bit on out and gk (gw is summed
// with atomics, whose order differs).
//
// usage: timex_check DTYPE B C T [TOLERANCE]   (TOLERANCE defaults to 1e-5 in float32, plus 4
//        units of roundoff in bfloat16 or float16, as Family.tolerance_for)
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

struct Buffer {  // `count` values of a dtype, created as 0xff bytes (NaN)
  TimexDtype dtype;
  std::vector<unsigned char> bytes;
  Buffer(TimexDtype d, size_t count) : dtype(d), bytes(count * (d == TIMEX_F32 ? 4 : 2) + 64, 0xff) {}
  void* data() { return bytes.data(); }
  double get(size_t i) const {
    if (dtype == TIMEX_F32) {
      float f;
      memcpy(&f, bytes.data() + 4 * i, 4);
      return f;
    }
    uint16_t b;
    memcpy(&b, bytes.data() + 2 * i, 2);
    return dtype == TIMEX_F16 ? __half::to_float(b) : __nv_bfloat16::to_float(b);
  }
  void set(size_t i, float x) {
    if (dtype == TIMEX_F32) return (void)memcpy(bytes.data() + 4 * i, &x, 4);
    const uint16_t b = dtype == TIMEX_F16 ? __half(x).x : __nv_bfloat16(x).x;
    memcpy(bytes.data() + 2 * i, &b, 2);
  }
};

double rel_error(const Buffer& got, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = got.get(i) - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  return std::isnan(num) ? INFINITY : std::sqrt(num / den);
}

}  // namespace

int main(int argc, char** argv) {
  const int t_arg = argc < 5 ? 0 : atoi(argv[4]);
  if (argc < 5 || !(timex_fft_warp_takes(t_arg, false) || (t_arg > TIMEX_TMAX && t_arg <= TIMEX_FFT_TMAX))) {
    fprintf(stderr, "usage: %s float32|bfloat16|float16 B C T [TOLERANCE], T in 193..16384\n", argv[0]);
    return 2;
  }
  const std::string dname = argv[1];
  const TimexDtype dtype = dname == "float32" ? TIMEX_F32 : dname == "bfloat16" ? TIMEX_BF16 : TIMEX_F16;
  const int B = atoi(argv[2]), C = atoi(argv[3]), T = atoi(argv[4]);
  const double u = dtype == TIMEX_F32 ? 0 : dtype == TIMEX_BF16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
  const double tol = argc > 5 ? atof(argv[5]) : 1e-5 + 4 * u;
  const float eps = 0.25f;
  std::mt19937 gen(17u * B + 31u * T + C);
  std::uniform_real_distribution<float> sym(-1.f, 1.f), pos(0.01f, 1.f);
  Buffer w(dtype, (size_t)C * T), k(dtype, (size_t)B * C * T), g(dtype, (size_t)B * C * T);
  for (size_t i = 0; i < (size_t)C * T; ++i) w.set(i, pos(gen));
  for (size_t i = 0; i < (size_t)B * C * T; ++i) k.set(i, sym(gen)), g.set(i, sym(gen));

  std::vector<double> out((size_t)B * C * T), gk(out.size()), gw((size_t)C * T, 0.0);
  for (int b = 0; b < B; ++b)
    for (int c = 0; c < C; ++c) {
      const size_t r = ((size_t)b * C + c) * T;
      for (int t = 0; t < T; ++t) {
        double o = eps, s = 0;
        for (int x = 0; x <= t; ++x) o += w.get((size_t)c * T + T - 1 - (t - x)) * k.get(r + x);
        for (int x = t; x < T; ++x) s += g.get(r + x) * w.get((size_t)c * T + T - 1 - (x - t));
        out[r + t] = o;
        gk[r + t] = s;
      }
      for (int j = 0; j < T; ++j)
        for (int x = 0; x <= j; ++x) gw[(size_t)c * T + j] += g.get(r + T - 1 - j + x) * k.get(r + x);
    }

  const emu::WarpOrder orders[2] = {emu::WarpOrder::Forward, emu::WarpOrder::Reverse};
  std::vector<unsigned char> first_out, first_gk, first_gw;
  bool ok = true;
  for (int s = 0; s < 2; ++s) {
    emu::schedule.order = orders[s];
    Buffer o(dtype, out.size()), dk(dtype, out.size()), dw(dtype, gw.size());
    const bool long_rows = T > TIMEX_TMAX;
    const size_t f_floats = long_rows ? timex_fft_long_scratch(B, C, T, false) : timex_fft_warp_scratch(C, T, false);
    const size_t b_floats = long_rows ? timex_fft_long_scratch(B, C, T, true) : timex_fft_warp_scratch(C, T, true);
    std::vector<float> fs(f_floats + 1, NAN), bs(b_floats + 1, NAN);
    const cudaError_t e1 = (long_rows ? timex_fft_long_forward : timex_fft_warp_forward)(
        dtype, w.data(), k.data(), o.data(), eps, fs.data(), B, C, T, nullptr);
    const bool backward = long_rows || timex_fft_warp_takes(T, true);  // else timex_fft.cu's, not emulated here
    const cudaError_t e2 = backward ? (long_rows ? timex_fft_long_backward : timex_fft_warp_backward)(
                                          dtype, w.data(), k.data(), g.data(), dw.data(), dk.data(), bs.data(), B, C,
                                          T, nullptr)
                                    : cudaSuccess;
    const double eo = rel_error(o, out), ek = backward ? rel_error(dk, gk) : 0, ew = backward ? rel_error(dw, gw) : 0;
    const bool fine = e1 == cudaSuccess && e2 == cudaSuccess && eo <= tol && ek <= tol && ew <= tol;
    printf("timex-fft %s B=%d C=%d T=%d %s: out %.2e gk %.2e gw %.2e%s (tolerance %.1e) %s\n", dname.c_str(), B, C,
           T, s ? "reverse" : "forward", eo, ek, ew, backward ? "" : " (no backward here)", tol, fine ? "OK" : "FAIL");
    ok &= fine;
    if (s == 0) {
      first_out = o.bytes, first_gk = dk.bytes, first_gw = dw.bytes;
    } else if (first_out != o.bytes || first_gk != dk.bytes) {
      printf("schedules DIFFER on out or gk\n");
      ok = false;
    }
  }
  for (int s = 0; s < 2 && T > TIMEX_TMAX; ++s) {  // autograd's path: the backward reads the spectra the
    emu::schedule.order = orders[s];                 // forward left, bit for bit the same results
    Buffer o(dtype, out.size());
    std::vector<float> saved(timex_fft_saved_floats(B, C, T) + 1, NAN);
    const cudaError_t e1 = timex_fft_forward_saving(dtype, w.data(), k.data(), o.data(), eps, saved.data(), B, C, T,
                                                    nullptr);
    bool same = e1 == cudaSuccess && o.bytes == first_out;
    for (int again = 0; again < 2; ++again) {  // a stored forward's backward may run again from the same spectra
      Buffer dk2(dtype, out.size()), dw2(dtype, gw.size());
      const cudaError_t e2 = timex_fft_backward_saved(dtype, w.data(), k.data(), g.data(), dw2.data(), dk2.data(),
                                                      saved.data(), B, C, T, nullptr);
      same &= e2 == cudaSuccess && dk2.bytes == first_gk && dw2.bytes == first_gw;
    }
    printf("timex-fft %s B=%d C=%d T=%d %s, spectra kept by the forward: %s\n", dname.c_str(), B, C, T,
           s ? "reverse" : "forward", same ? "the same bits OK" : "DIFFER FAIL");
    ok &= same;
  }
  printf("RESULT %s\n", ok ? "OK" : "FAIL");
  return ok ? 0 : 1;
}
