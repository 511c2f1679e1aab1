// gelu_tanh: y = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) over n elements. Plain C++ launchers,
// no torch headers, so this half builds (and is checked) with nvcc alone.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

cudaError_t gelu_tanh_launch(const float* x, float* y, long long n, cudaStream_t stream);
cudaError_t gelu_tanh_launch(const __nv_bfloat16* x, __nv_bfloat16* y, long long n, cudaStream_t stream);
