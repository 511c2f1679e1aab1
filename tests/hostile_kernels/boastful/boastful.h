// boastful: y = 2 * x + 1 over n float32 elements, computed honestly; its spec.py overstates the work
// (a test bed for the harness, not a shipped kernel). Plain C++ launcher, no torch headers.
#pragma once
#include <cuda_runtime.h>

cudaError_t boastful_launch(const float* x, float* y, long long n, cudaStream_t stream);
