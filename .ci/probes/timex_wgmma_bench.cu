// timex-wgmma's forward (kernels/timex/timex_wgmma.cu) against timex-mma's (timex_mma.cu) on the GPU, bf16,
// without torch: both checked against float64 direct sums on 48 random rows, then timed (CUDA events, median,
// hot L2).
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Icudabench/spec/include -Ikernels/timex \
//        kernels/timex/timex_mma.cu kernels/timex/timex_wgmma.cu .ci/probes/timex_wgmma_bench.cu -o /tmp/twb
//   /tmp/twb B C T [reps]
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
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
  auto wgmma = [&] { return timex_wgmma_forward(TIMEX_BF16, w, k, out, eps, B, C, T, 0); };
  auto mma = [&] { return timex_mma_forward(TIMEX_BF16, w, k, out, eps, B, C, T, 0); };
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
        double sum = eps;
        for (int u = 0; u <= t; ++u)
          sum += (double)__bfloat162float(hw[(size_t)c * T + T - 1 - (t - u)]) *
                 __bfloat162float(hk[((size_t)b * C + c) * T + u]);
        const double d = __bfloat162float(ho[((size_t)b * C + c) * T + t]) - sum;
        num += d * d;
        den += sum * sum;
      }
    }
    const float us = v == 0 ? median_us(wgmma, reps) : median_us(mma, reps);
    const double bytes = 2.0 * nk * 2 + nw * 2;
    printf("%-16s bf16 B=%d C=%d T=%d: fwd %7.1f us (%.0f GB/s), rel error %.2e on 48 rows\n", names[v], B, C, T, us,
           bytes / us / 1e3, std::sqrt(num / den));
  }
  return 0;
}
