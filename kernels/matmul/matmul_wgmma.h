// matmul-wgmma: C (M×N) = A (M×K) · B (K×N), bfloat16, row-major, float32 sums. Plain C++ launcher,
// no torch headers. The kernel exists only in a build for sm_90a (matmul_wgmma.cu).
#pragma once
#include <cuda_runtime.h>

// Why it cannot run on the current GPU (not a Hopper one), or nullptr.
const char* matmul_wgmma_not_here();

// Why it cannot run at M, N, K with tiles `bn` (128 or 256) wide, or nullptr.
const char* matmul_wgmma_unsupported(int M, int N, int K, int bn);

// a, b, c: __nv_bfloat16 matrices, 16-byte aligned (TMA)
cudaError_t matmul_wgmma_launch(const void* a, const void* b, void* c, int M, int N, int K, int bn,
                                cudaStream_t stream);
