#include "scale.h"

namespace {

constexpr int kThreads = 256;
constexpr long long kMaxBlocks = 4096;  // past this, each thread loops (grid stride) instead

__global__ void scale_kernel(const float* __restrict__ x, float alpha, float beta, float* __restrict__ y,
                             long long n) {
  for (long long i = (long long)blockIdx.x * kThreads + threadIdx.x; i < n; i += (long long)gridDim.x * kThreads) {
    y[i] = fmaf(alpha, x[i], beta);
  }
}

}  // namespace

cudaError_t scale_launch(const float* x, float alpha, float beta, float* y, long long n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const long long needed = (n + kThreads - 1) / kThreads;
  const int blocks = (int)(needed < kMaxBlocks ? needed : kMaxBlocks);
  scale_kernel<<<blocks, kThreads, 0, stream>>>(x, alpha, beta, y, n);
  return cudaGetLastError();
}
