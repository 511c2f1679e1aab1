// attn-flash3's forward timed without torch (docs/benchmarks/h100-hopper.md, "What each step of the
// forward bought"), checked against a naive fp32 kernel first where that is quick. VAR is a folder with a
// variant of kernels/attention/flash3.cu and flash3.cuh (or kernels/attention itself), searched first:
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I$VAR -Icudabench/spec/include -Ikernels/attention \
//        .ci/probes/flash3_bench.cu -o /tmp/flash3_bench
// Usage: flash3_bench B H N D causal [reps [label]]: bf16, the median of `reps` calls each between events.
#include "flash3.cu"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

const char* attention_flash_unsupported(int D) { return D == 64 || D == 128 ? nullptr : "D"; }

__global__ void naive_attention(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, float* o,
                                int N, int D, int causal) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x, bh = blockIdx.y;
  if (row >= N) return;
  const size_t base = size_t(bh) * N * D;
  const float scale = 1.0f / sqrtf(float(D));
  float m = -INFINITY, l = 0.0f;
  const int last = causal ? row : N - 1;
  for (int key = 0; key <= last; ++key) {
    float s = 0.0f;
    for (int d = 0; d < D; ++d) s += __bfloat162float(q[base + size_t(row) * D + d]) * __bfloat162float(k[base + size_t(key) * D + d]);
    m = fmaxf(m, s * scale);
  }
  for (int d = 0; d < D; ++d) o[base + size_t(row) * D + d] = 0.0f;
  for (int key = 0; key <= last; ++key) {
    float s = 0.0f;
    for (int d = 0; d < D; ++d) s += __bfloat162float(q[base + size_t(row) * D + d]) * __bfloat162float(k[base + size_t(key) * D + d]);
    const float p = expf(s * scale - m);
    l += p;
    for (int d = 0; d < D; ++d) o[base + size_t(row) * D + d] += p * __bfloat162float(v[base + size_t(key) * D + d]);
  }
  for (int d = 0; d < D; ++d) o[base + size_t(row) * D + d] /= l;
}

#define CHECK(x)                                                                                \
  do {                                                                                          \
    cudaError_t e_ = (x);                                                                       \
    if (e_ != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      return 1;                                                                                 \
    }                                                                                           \
  } while (0)

int main(int argc, char** argv) {
  const int B = atoi(argv[1]), H = atoi(argv[2]), N = atoi(argv[3]), D = atoi(argv[4]), causal = atoi(argv[5]);
  const int reps = argc > 6 ? atoi(argv[6]) : 30;
  const int BH = B * H;
  const size_t n = size_t(BH) * N * D;
  std::vector<__nv_bfloat16> h(3 * n);
  unsigned state = 2024;
  for (auto& x : h) {
    state = state * 1664525u + 1013904223u;
    x = __float2bfloat16(((state >> 8) * (1.0f / 16777216.0f) * 2.0f - 1.0f) * 2.0f);
  }
  __nv_bfloat16 *qkv, *out;
  float *ref, *lse;
  CHECK(cudaMalloc(&qkv, 3 * n * 2));
  CHECK(cudaMalloc(&out, n * 2));
  CHECK(cudaMalloc(&ref, n * 4));
  CHECK(cudaMalloc(&lse, size_t(BH) * N * 4));
  CHECK(cudaMemcpy(qkv, h.data(), 3 * n * 2, cudaMemcpyHostToDevice));
  const __nv_bfloat16 *q = qkv, *k = qkv + n, *v = qkv + 2 * n;
  const float scale = 1.0f / std::sqrt(float(D));
  double rel = -1;
  size_t bad = 0;
  if (size_t(BH) * N * N * D < (size_t(1) << 36)) {  // the naive check only where it is quick
    naive_attention<<<dim3((N + 127) / 128, BH), 128>>>(q, k, v, ref, N, D, causal);
    CHECK(cudaMemset(out, 0xFF, n * 2));
    CHECK(attention_flash3_forward(q, k, v, out, lse, scale, causal, false, BH, N, D, 0));
    CHECK(cudaDeviceSynchronize());
    std::vector<__nv_bfloat16> got(n);
    std::vector<float> want(n);
    CHECK(cudaMemcpy(got.data(), out, n * 2, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(want.data(), ref, n * 4, cudaMemcpyDeviceToHost));
    double num = 0, den = 0;
    for (size_t i = 0; i < n; ++i) {
      const double g = __bfloat162float(got[i]), w = want[i];
      num += (g - w) * (g - w);
      den += w * w;
      if (!(std::abs(g - w) <= 0.02 + 0.02 * std::abs(w))) ++bad;
    }
    rel = std::sqrt(num / den);
  }
  cudaEvent_t t0, t1;
  CHECK(cudaEventCreate(&t0));
  CHECK(cudaEventCreate(&t1));
  for (int i = 0; i < 5; ++i) CHECK(attention_flash3_forward(q, k, v, out, lse, scale, causal, false, BH, N, D, 0));
  std::vector<float> times;
  for (int i = 0; i < reps; ++i) {
    CHECK(cudaEventRecord(t0));
    CHECK(attention_flash3_forward(q, k, v, out, lse, scale, causal, false, BH, N, D, 0));
    CHECK(cudaEventRecord(t1));
    CHECK(cudaEventSynchronize(t1));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, t0, t1));
    times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  const double sec = times[times.size() / 2] / 1e3, flops = 4.0 * BH * double(N) * N * D / (causal ? 2 : 1);
  std::printf("%-10s B=%d H=%d N=%d D=%d causal=%d: rel err %.3g, %zu bad; median %.1f us, %.1f TFLOP/s\n",
              argc > 7 ? argv[7] : "", B, H, N, D, causal, rel, bad, sec * 1e6, flops / sec / 1e12);
  return bad ? 2 : 0;
}
