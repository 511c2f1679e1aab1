// add2: c = a + b over n float32 elements. Plain C++ launcher, no torch headers.
#pragma once
#include <cuda_runtime.h>

cudaError_t add2_launch(const float* a, const float* b, float* c, long long n, cudaStream_t stream);
