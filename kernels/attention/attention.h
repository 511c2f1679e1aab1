// Scaled dot-product attention, float32: out = softmax(Q K^T * scale [+ causal mask]) V per (batch, head).
// q, k, v, out are (B, H, N, D) contiguous; P and dP are (B, H, N, N) scratch. Plain C++ launchers.
#pragma once
#include <cstddef>
#include <cuda_runtime.h>

// Why (B, H, N, D) cannot run, or nullptr when it can.
const char* attention_unsupported(int B, int H, int N, int D);

// attn-naive forward: P = softmax(scale Q K^T, causal-masked), out = P V (P is kept for the backward).
cudaError_t attention_naive_forward(const float* q, const float* k, const float* v, float* out, float* P, float scale,
                                    bool causal, int BH, int N, int D, cudaStream_t stream);

// attn-naive backward from the saved P: dV = P^T dO, dS = P * (dO V^T - rowsum(dO * out)) * scale,
// dQ = dS K, dK = dS^T Q. dP is N x N scratch per (batch, head); rows is BH * N floats of scratch.
cudaError_t attention_naive_backward(const float* q, const float* k, const float* v, const float* out,
                                     const float* P, const float* dout, float* dq, float* dk, float* dv, float* dP,
                                     float* rows, float scale, int BH, int N, int D, cudaStream_t stream);
