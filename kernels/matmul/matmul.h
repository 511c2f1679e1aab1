// matmul: C (M×N) = A (M×K) · B (K×N), float32, row-major. Plain C++ launchers, no torch headers.
#pragma once
#include <cuda_runtime.h>

enum MatmulVariant { MATMUL_NAIVE = 0, MATMUL_TILED = 1, MATMUL_REGTILE = 2 };

// Why the variant cannot run at M, N, K, or nullptr.
const char* matmul_unsupported(int variant, int M, int N, int K);

cudaError_t matmul_launch(int variant, const float* A, const float* B, float* C, int M, int N, int K,
                          cudaStream_t stream);
