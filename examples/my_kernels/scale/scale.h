// scale: y = alpha * x + beta over n float32 elements. Plain C++ launcher, no torch headers.
#pragma once
#include <cuda_runtime.h>

cudaError_t scale_launch(const float* x, float alpha, float beta, float* y, long long n, cudaStream_t stream);
