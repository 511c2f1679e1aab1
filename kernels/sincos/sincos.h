// sincos: y = sin(x)^2 + cos(x)^2 over n float32 elements, in one pass. Plain C++ launcher.
#pragma once
#include <cuda_runtime.h>

// Needs x and y 16-byte aligned (float4 access); the binding checks it.
cudaError_t sincos_launch(const float* x, float* y, long long n, cudaStream_t stream);
