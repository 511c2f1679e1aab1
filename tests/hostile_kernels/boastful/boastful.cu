#include "boastful.h"

namespace {

constexpr int kThreads = 256;
constexpr long long kMaxBlocks = 4096;  // past this, each thread loops (grid stride) instead

__global__ void boastful_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
  for (long long i = (long long)blockIdx.x * kThreads + threadIdx.x; i < n; i += (long long)gridDim.x * kThreads) {
    y[i] = fmaf(2.0f, x[i], 1.0f);
  }
}

}  // namespace

cudaError_t boastful_launch(const float* x, float* y, long long n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const long long needed = (n + kThreads - 1) / kThreads;
  const int blocks = (int)(needed < kMaxBlocks ? needed : kMaxBlocks);
  boastful_kernel<<<blocks, kThreads, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}
