// add2: c = a + b over n float32 elements. Plain C++ launchers, no torch headers.
#pragma once
#include <cuda_runtime.h>

enum Add2Variant { ADD2_SCALAR = 0, ADD2_VEC4 = 1, ADD2_TILE = 2 };

// ADD2_VEC4 and ADD2_TILE need a, b and c 16-byte aligned; the launcher falls back to the scalar kernel otherwise.
cudaError_t add2_launch(int variant, const float* a, const float* b, float* c, long long n, cudaStream_t stream);
