// timex-wgmma's forward (kernels/timex/timex_wgmma.cu) against timex-mma's (timex_mma.cu) on the GPU, bf16,
// without torch: both checked against float64 direct sums on 48 random rows, then timed (CUDA events, median,
// hot L2). With `bwd`: gk the same way (timex-wgmma's; timex-mma's whole backward), then gw (both: on 8
// channels), then both backwards timed.
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Icudabench/spec/include -Ikernels/timex \
//        kernels/timex/timex_mma.cu kernels/timex/timex_wgmma.cu kernels/timex/timex_wgmma_gw.cu \
//        .ci/probes/timex_wgmma_bench.cu -o /tmp/twb
//   /tmp/twb B C T [reps] [bwd]
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "timex.h"


template <typename F>
float median_us(F&& f, int reps) {
  cudaEvent_t t0, t1;
  cudaEventCreate(&t0);
  cudaEventCreate(&t1);
  std::vector<float> times;
  for (int i = 0; i < reps + 3; ++i) {
    cudaEventRecord(t0);
    f();
    cudaEventRecord(t1);
    cudaEventSynchronize(t1);
    float ms = 0;
    cudaEventElapsedTime(&ms, t0, t1);
    if (i >= 3) times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2] * 1e3f;
}

int main(int argc, char** argv) {
  if (argc < 4) return fprintf(stderr, "usage: twb B C T [reps]\n"), 2;
  const int B = atoi(argv[1]), C = atoi(argv[2]), T = atoi(argv[3]), reps = argc > 4 ? atoi(argv[4]) : 100;
  const bool bwd = argc > 5 && std::string(argv[5]) == "bwd";
  if (const char* why = timex_wgmma_unsupported(B, C, T)) return printf("unsupported: %s\n", why), 2;
  const size_t nk = (size_t)B * C * T, nw = (size_t)C * T;
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> sym(-1.0f, 1.0f), pos(0.0f, 1.0f);
  std::vector<__nv_bfloat16> hk(nk), hw(nw), ho(nk);
  for (auto& x : hk) x = __float2bfloat16(sym(gen));
  for (auto& x : hw) x = __float2bfloat16(1.0f - pos(gen));
  void *w, *k, *out;
  cudaMalloc(&w, nw * 2);
  cudaMalloc(&k, nk * 2);
  cudaMalloc(&out, nk * 2);
  cudaMemcpy(w, hw.data(), nw * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(k, hk.data(), nk * 2, cudaMemcpyHostToDevice);
  const float eps = 0.25f;
  void *gw, *gk;  // bwd: k plays g for gk (the sums are the same kind); gw from k and g = k
  float* scratch;
  cudaMalloc(&gw, nw * 2);
  cudaMalloc(&scratch, timex_mma_scratch(B, C, T, true) * 4 + 16);
  gk = out;
  auto wgmma = [&] {
    return bwd ? timex_wgmma_gk(TIMEX_BF16, w, k, gk, B, C, T, 0) : timex_wgmma_forward(TIMEX_BF16, w, k, out, eps, B, C, T, 0);
  };
  auto mma = [&] {
    return bwd ? timex_mma_backward(TIMEX_BF16, w, k, k, gw, gk, scratch, B, C, T, 0)
               : timex_mma_forward(TIMEX_BF16, w, k, out, eps, B, C, T, 0);
  };
  const char* names[2] = {"timex-wgmma", "timex-mma"};
  for (int v = 0; v < 2; ++v) {
    cudaMemset(out, 0xff, nk * 2);
    const cudaError_t launched = v == 0 ? wgmma() : mma();
    const cudaError_t done = cudaDeviceSynchronize();
    if (launched != cudaSuccess || done != cudaSuccess) {
      printf("%s: %s / %s\n", names[v], cudaGetErrorString(launched), cudaGetErrorString(done));
      return 1;
    }
    cudaMemcpy(ho.data(), out, nk * 2, cudaMemcpyDeviceToHost);
    double num = 0, den = 0;
    std::uniform_int_distribution<int> pick_b(0, B - 1), pick_c(0, C - 1);
    for (int row = 0; row < 48; ++row) {
      const int b = pick_b(gen), c = pick_c(gen);
      for (int t = 0; t < T; ++t) {
        double sum = bwd ? 0.0 : eps;
        for (int u = bwd ? t : 0; bwd ? u < T : u <= t; ++u)
          sum += (double)__bfloat162float(hw[(size_t)c * T + T - 1 - (bwd ? u - t : t - u)]) *
                 __bfloat162float(hk[((size_t)b * C + c) * T + u]);
        const double d = __bfloat162float(ho[((size_t)b * C + c) * T + t]) - sum;
        num += d * d;
        den += sum * sum;
      }
    }
    const float us = v == 0 ? median_us(wgmma, reps) : median_us(mma, reps);
    const double bytes = 2.0 * nk * 2 + nw * 2;
    printf("%-16s bf16 B=%d C=%d T=%d: %s %7.1f us (%.0f GB/s), rel error %.2e on 48 rows\n", names[v], B, C, T,
           bwd ? (v == 0 ? "gk" : "gk+gw") : "fwd", us, bytes / us / 1e3, std::sqrt(num / den));
  }
  if (bwd) {  // gw from k and a second random g: timex-wgmma's and timex-mma's against float64 sums on 8 channels
    std::vector<__nv_bfloat16> hg(nk), hgw(nw);
    for (auto& x : hg) x = __float2bfloat16(sym(gen));
    void* g;
    cudaMalloc(&g, nk * 2);
    cudaMemcpy(g, hg.data(), nk * 2, cudaMemcpyHostToDevice);
    auto wgmma_gw = [&] { return timex_wgmma_gw(TIMEX_BF16, k, g, gw, B, C, T, 0); };
    auto mma_gw = [&] { return timex_mma_gw(TIMEX_BF16, k, g, gw, scratch, B, C, T, 0); };
    for (int v = 0; v < 2; ++v) {
      cudaMemset(gw, 0xff, nw * 2);
      const cudaError_t launched = v == 0 ? wgmma_gw() : mma_gw();
      const cudaError_t done = cudaDeviceSynchronize();
      if (launched != cudaSuccess || done != cudaSuccess)
        return printf("%s gw: %s / %s\n", names[v], cudaGetErrorString(launched), cudaGetErrorString(done)), 1;
      cudaMemcpy(hgw.data(), gw, nw * 2, cudaMemcpyDeviceToHost);
      double num = 0, den = 0;
      std::uniform_int_distribution<int> pick_c(0, C - 1);
      for (int n = 0; n < 8; ++n) {
        const int c = pick_c(gen);
        std::vector<double> ref(T, 0.0);
        for (int b = 0; b < B; ++b)
          for (int u = 0; u < T; ++u)
            for (int s = u; s < T; ++s)
              ref[T - 1 - (s - u)] += (double)__bfloat162float(hg[((size_t)b * C + c) * T + s]) *
                                      __bfloat162float(hk[((size_t)b * C + c) * T + u]);
        for (int j = 0; j < T; ++j) {
          const double d = __bfloat162float(hgw[(size_t)c * T + j]) - ref[j];
          num += d * d;
          den += ref[j] * ref[j];
        }
      }
      const float us = median_us(v == 0 ? std::function<cudaError_t()>(wgmma_gw) : std::function<cudaError_t()>(mma_gw), reps);
      printf("%-16s bf16 B=%d C=%d T=%d: gw %7.1f us, rel error %.2e on 8 channels\n", names[v], B, C, T, us,
             std::sqrt(num / den));
    }
    const float both = median_us([&] {
      timex_wgmma_gk(TIMEX_BF16, w, g, gk, B, C, T, 0);
      return timex_wgmma_gw(TIMEX_BF16, k, g, gw, B, C, T, 0);
    }, reps);
    const float mma_both = median_us([&] { return timex_mma_backward(TIMEX_BF16, w, k, g, gw, gk, scratch, B, C, T, 0); }, reps);
    printf("backward (gk, gw): timex-wgmma %7.1f us, timex-mma %7.1f us\n", both, mma_both);
  }
  return 0;
}
