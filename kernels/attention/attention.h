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

// The flash kernels keep no score matrix. lse (BH * N floats) is each query row's log-sum-exp of its
// scaled scores, natural log: lse_i = log sum_j exp(scale q_i . k_j) over its unmasked keys, so that
// P_ij = exp(scale q_i . k_j - lse_i). The backward recomputes P from it. delta (BH * N floats) is the
// backward's scratch for rowsum(dO * out). Head dimension D must be 64 or 128.
const char* attention_flash_unsupported(int D);
// Dynamic shared memory per block of attn-flash1's / attn-flash2's largest forward or backward kernel at
// head dimension D.
size_t attention_flash1_smem(int D, bool backward);
size_t attention_flash2_smem(int D, bool backward);

// attn-flash1, float32: one kernel; each block streams K/V tiles through shared memory past its query
// tile, with the online softmax. The backward: delta, then dK/dV per key tile, then dQ per query tile.
cudaError_t attention_flash1_forward(const float* q, const float* k, const float* v, float* out, float* lse,
                                     float scale, bool causal, int BH, int N, int D, cudaStream_t stream);
cudaError_t attention_flash1_backward(const float* q, const float* k, const float* v, const float* out,
                                      const float* lse, const float* dout, float* dq, float* dk, float* dv,
                                      float* delta, float scale, bool causal, int BH, int N, int D,
                                      cudaStream_t stream);

// attn-flash2, bfloat16 or float16 (fp16 true) in and out, float32 sums on tensor cores (mma.sync).
// The backward accumulates dQ in dq_accum (BH * N * D floats of scratch, zeroed here) across key tiles.
cudaError_t attention_flash2_forward(const void* q, const void* k, const void* v, void* out, float* lse,
                                     float scale, bool causal, bool fp16, int BH, int N, int D,
                                     cudaStream_t stream);
cudaError_t attention_flash2_backward(const void* q, const void* k, const void* v, const void* out,
                                      const float* lse, const void* dout, void* dq, void* dk, void* dv,
                                      float* delta, float* dq_accum, float scale, bool causal, bool fp16, int BH,
                                      int N, int D, cudaStream_t stream);

// attn-flash3, bfloat16 or float16 (fp16 true), on Hopper's TMA and wgmma (sm_90a only): q, k, v, out, dout,
// dq, dk, dv 16-byte aligned. The backward takes the forward's lse and delta (BH * N floats) as scratch.
const char* attention_flash3_not_here();           // why this GPU cannot run it, or nullptr
size_t attention_flash3_forward_smem(int D);       // dynamic shared memory per block
size_t attention_flash3_backward_smem(int D);
cudaError_t attention_flash3_forward(const void* q, const void* k, const void* v, void* out, float* lse,
                                     float scale, bool causal, bool fp16, int BH, int N, int D,
                                     cudaStream_t stream);
cudaError_t attention_flash3_backward(const void* q, const void* k, const void* v, const void* out, const float* lse,
                                      const void* dout, void* dq, void* dk, void* dv, float* delta, float scale,
                                      bool causal, bool fp16, int BH, int N, int D, cudaStream_t stream);
