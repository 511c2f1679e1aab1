// Checks one case of matmul-wgmma (kernels/matmul/matmul_wgmma.cu: TMA, mbarriers, wgmma, warp
// specialisation) on the emulator: random bf16 A (M×K) and B (K×N), C filled with NaN first, against a
// float64 product of the same bf16 values by ‖C − ref‖ / ‖ref‖, under two schedules that must also agree
// bit for bit: warps forward with TMA boxes poisoned until their phase completes and each wgmma landing at
// its wait, and warps in reverse with both landing at their issue.
//
// usage: matmul_wgmma_check M N K BN [TOLERANCE]      (BN, the tile width: 128 or 256)
// Prints a line per schedule, one on the bitwise comparison, then RESULT OK (exit 0) or RESULT FAIL (1).
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "matmul_wgmma.h"

namespace {

struct Matrix {  // bf16, 64-byte aligned, created as 0xff bytes (NaN)
  explicit Matrix(size_t count)
      : count(count), data(static_cast<__nv_bfloat16*>(aligned_alloc(64, (count * 2 / 64 + 1) * 64)), free) {
    memset(data.get(), 0xff, count * 2);
  }
  size_t count;
  std::unique_ptr<__nv_bfloat16, decltype(&free)> data;
  double at(size_t i) const { return __nv_bfloat16::to_float(data.get()[i].x); }
};

Matrix random_matrix(size_t count, std::mt19937& gen) {
  Matrix m(count);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (size_t i = 0; i < count; ++i) m.data.get()[i] = __nv_bfloat16(u(gen));
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: matmul_wgmma_check M N K BN [TOLERANCE]\n");
    return 2;
  }
  const int M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]), bn = atoi(argv[4]);
  const double tolerance = argc > 5 ? atof(argv[5]) : 1e-2;
  std::mt19937 gen(M * 7919 + N * 104729 + K);
  const Matrix a = random_matrix(size_t(M) * K, gen), b = random_matrix(size_t(K) * N, gen);
  std::vector<double> ref(size_t(M) * N, 0.0);
  for (int m = 0; m < M; ++m)
    for (int k = 0; k < K; ++k) {
      const double x = a.at(size_t(m) * K + k);
      for (int n = 0; n < N; ++n) ref[size_t(m) * N + n] += x * b.at(size_t(k) * N + n);
    }

  const auto& schedules = emu::hopper_schedules;
  const auto& names = emu::hopper_schedule_names;
  std::vector<Matrix> outputs;
  bool ok = true;
  for (int s = 0; s < 2; ++s) {
    emu::schedule = schedules[s];
    outputs.emplace_back(size_t(M) * N);
    const cudaError_t err = matmul_wgmma_launch(a.data.get(), b.data.get(), outputs.back().data.get(), M, N, K, bn, nullptr);
    if (err != cudaSuccess) {
      printf("%s: launch returned error %d\n", names[s], err);
      ok = false;
      continue;
    }
    double num = 0, den = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      const double d = outputs.back().at(i) - ref[i];
      num += d * d;
      den += ref[i] * ref[i];
    }
    const double err_rel = std::isnan(num) ? INFINITY : std::sqrt(num / den);
    printf("%s: M=%d N=%d K=%d BN=%d error %.3g (tolerance %.3g)\n", names[s], M, N, K, bn, err_rel, tolerance);
    ok &= err_rel <= tolerance;
  }
  const bool same = outputs.size() == 2 && memcmp(outputs[0].data.get(), outputs[1].data.get(), size_t(M) * N * 2) == 0;
  printf("schedules agree bit for bit: %s\n", same ? "yes" : "NO");
  ok &= same;
  printf("RESULT %s\n", ok ? "OK" : "FAIL");
  return ok ? 0 : 1;
}
