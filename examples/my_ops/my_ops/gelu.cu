// The op under test: one thread per element (a grid-stride loop past kMaxBlocks), math in float32
// whatever the storage type, as PyTorch's own GELU does for bfloat16.
#include "gelu.h"

namespace {

constexpr int kThreads = 256;
constexpr long long kMaxBlocks = 8192;

__device__ __forceinline__ float gelu_tanh_of(float x) {
  const float kSqrt2OverPi = 0.7978845608028654f;
  const float inner = kSqrt2OverPi * fmaf(0.044715f * x, x * x, x);
  return 0.5f * x * (1.0f + tanhf(inner));
}

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

template <typename T>
__global__ void gelu_tanh_kernel(const T* __restrict__ x, T* __restrict__ y, long long n) {
  for (long long i = (long long)blockIdx.x * kThreads + threadIdx.x; i < n; i += (long long)gridDim.x * kThreads) {
    store(y + i, gelu_tanh_of(to_float(x[i])));
  }
}

template <typename T>
cudaError_t launch(const T* x, T* y, long long n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const long long needed = (n + kThreads - 1) / kThreads;
  const int blocks = (int)(needed < kMaxBlocks ? needed : kMaxBlocks);
  gelu_tanh_kernel<T><<<blocks, kThreads, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}

}  // namespace

cudaError_t gelu_tanh_launch(const float* x, float* y, long long n, cudaStream_t stream) {
  return launch(x, y, n, stream);
}

cudaError_t gelu_tanh_launch(const __nv_bfloat16* x, __nv_bfloat16* y, long long n, cudaStream_t stream) {
  return launch(x, y, n, stream);
}
