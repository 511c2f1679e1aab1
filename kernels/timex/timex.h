// TimeX: causal depthwise convolution of k (B,C,T) with a per-channel kernel w (C,T).
//   out[b,c,t] = eps + sum_{u=0..t} w[c, T-1-(t-u)] * k[b,c,u]
// Backward with g = dL/dout:
//   gk[b,c,t] = sum_{s=t..T-1} g[b,c,s] * w[c, T-1-(s-t)]
//   gw[c,j]   = sum_b sum_{u=0..j} g[b,c,T-1-j+u] * k[b,c,u]
// Plain C++ launchers (no torch headers). All tensors contiguous; float32, except that timex-fft also
// takes bfloat16 and float16.
#pragma once
#include <cstddef>
#include <cuda_runtime.h>

constexpr int TIMEX_TMAX = 1024;  // v2..v5 keep one row per thread block (T/4 threads in v3, v4)
constexpr int TIMEX_FFT_TMAX = 16384;
constexpr int TIMEX_MMA_TMAX = 2048;  // timex-mma: 32 staged rows (and gw's transposed pair) in shared memory  // timex-fft: one row's packed transform fits one block's shared memory
constexpr int TIMEX_BF = 8;       // v4 forward: batch rows per block sharing one staged w row
constexpr int TIMEX_BB = 2;       // v4 backward: batch rows per block
constexpr int TIMEX_BB5 = 4;      // v5 backward: batch rows per block

// Why (version, B, C, T) cannot run, or nullptr when it can.
const char* timex_unsupported(int version, int B, int C, int T, bool backward);

// Floats of scratch the forward needs (timex-fft beyond T = 1024: the weights' spectra); 0 when none.
size_t timex_forward_scratch(int version, int B, int C, int T);

cudaError_t timex_forward(int version, const float* w, const float* k, float* out, float eps, float* scratch,
                          int B, int C, int T, cudaStream_t stream);

// Floats of scratch the backward needs (partial per-batch gw sums); 0 when none.
size_t timex_backward_scratch(int version, int B, int C, int T);

cudaError_t timex_backward(int version, const float* w, const float* k, const float* g, float* gw,
                           float* gk, float* scratch, int B, int C, int T, cudaStream_t stream);

// gw[i] = sum_p part[p, i] over P partial sums of n values (timex.cu).
cudaError_t timex_sum_partials(const float* part, float* gw, int P, size_t n, cudaStream_t stream);

// timex-fft (version 6): spectra products with on-chip FFTs. T <= 1024: two rows per FFT, blocks per
// channel (timex_fft.cu); beyond, one row per FFT (timex_fft_long.cu), which these dispatch to.
// Inputs and outputs in float32, bfloat16 or float16 (all tensors of one call alike); every sum in
// float32, and the scratch is float32 whatever the dtype.
enum TimexDtype { TIMEX_F32 = 0, TIMEX_BF16 = 1, TIMEX_F16 = 2 };
size_t timex_fft_scratch(int B, int C, int T, bool backward);  // floats of scratch (spectra, partial gw sums)
cudaError_t timex_fft_forward(TimexDtype dtype, const void* w, const void* k, void* out, float eps, float* scratch,
                              int B, int C, int T, cudaStream_t stream);
cudaError_t timex_fft_backward(TimexDtype dtype, const void* w, const void* k, const void* g, void* gw, void* gk,
                               float* scratch, int B, int C, int T, cudaStream_t stream);

// A forward whose backward follows (autograd): beyond T = 1024 it leaves the weights' spectra, the
// twiddles and each row of k's spectrum in `saved` (timex_fft_saved_floats of them; 0 for shorter T,
// where nothing is kept), and the backward given the same `saved` reads them instead of making them
// again: one transform per channel and one per row fewer. The backward leaves them as they are.
size_t timex_fft_saved_floats(int B, int C, int T);
cudaError_t timex_fft_forward_saving(TimexDtype dtype, const void* w, const void* k, void* out, float eps,
                                     float* saved, int B, int C, int T, cudaStream_t stream);
cudaError_t timex_fft_backward_saved(TimexDtype dtype, const void* w, const void* k, const void* g, void* gw,
                                     void* gk, float* saved, int B, int C, int T, cudaStream_t stream);

// timex-fft for the T whose transform is 512..2048 points (192 < T <= 1024; the backward to 1536
// points, T <= 768): one warp per transform, held in registers (timex_fft_warp.cu);
// timex_fft_forward/backward dispatch to it.
bool timex_fft_warp_takes(int T, bool backward);
size_t timex_fft_warp_scratch(int C, int T, bool backward);  // floats
cudaError_t timex_fft_warp_forward(TimexDtype dtype, const void* w, const void* k, void* out, float eps,
                                   float* scratch, int B, int C, int T, cudaStream_t stream);
cudaError_t timex_fft_warp_backward(TimexDtype dtype, const void* w, const void* k, const void* g, void* gw,
                                    void* gk, float* scratch, int B, int C, int T, cudaStream_t stream);

// timex-fft for 1024 < T <= TIMEX_FFT_TMAX (timex_fft_long.cu).
size_t timex_fft_long_scratch(int B, int C, int T, bool backward);
cudaError_t timex_fft_long_forward(TimexDtype dtype, const void* w, const void* k, void* out, float eps,
                                   float* scratch, int B, int C, int T, cudaStream_t stream);
cudaError_t timex_fft_long_backward(TimexDtype dtype, const void* w, const void* k, const void* g, void* gw,
                                    void* gk, float* scratch, int B, int C, int T, cudaStream_t stream);

// timex-mma (version 7, timex_mma.cu): Toeplitz products on tensor cores (mma.sync), bfloat16 or
// float16 only, float32 sums; T <= TIMEX_MMA_TMAX, any B and C. The backward's scratch holds gw's
// partial sums (float32) per group of 16 batch rows.
size_t timex_mma_scratch(int B, int C, int T, bool backward);
size_t timex_mma_smem(int T, bool backward);  // shared memory per block it needs at T (bytes)
cudaError_t timex_mma_forward(TimexDtype dtype, const void* w, const void* k, void* out, float eps, int B, int C,
                              int T, cudaStream_t stream);
cudaError_t timex_mma_backward(TimexDtype dtype, const void* w, const void* k, const void* g, void* gw, void* gk,
                               float* scratch, int B, int C, int T, cudaStream_t stream);
// gw alone (the backward's second half; timex-wgmma's backward takes it after its own gk)
cudaError_t timex_mma_gw(TimexDtype dtype, const void* k, const void* g, void* gw, float* scratch, int B, int C, int T,
                         cudaStream_t stream);

// timex-wgmma (version 8, timex_wgmma.cu and timex_wgmma_gw.cu): forward, gk and gw on Hopper's wgmma (sm_90a),
// bfloat16 or float16, T <= TIMEX_WGMMA_TMAX and T % 8 == 0, any C, B within timex-mma's limit; w and the rows
// it reads and writes (k and out; g, k and gk) 16-byte aligned. Every sum in a fixed order: deterministic.
constexpr int TIMEX_WGMMA_TMAX = 768;
const char* timex_wgmma_not_here();  // why not on this GPU (not a Hopper one), or nullptr
const char* timex_wgmma_unsupported(int B, int C, int T);
cudaError_t timex_wgmma_forward(TimexDtype dtype, const void* w, const void* k, void* out, float eps, int B, int C,
                                int T, cudaStream_t stream);
// gk = G . Wb (timex.h's backward) on the same kernel, the Toeplitz tiles transposed; same limits.
cudaError_t timex_wgmma_gk(TimexDtype dtype, const void* w, const void* g, void* gk, int B, int C, int T,
                           cudaStream_t stream);
// gw on wgmma (timex_wgmma_gw.cu): a block per channel over all its batch rows, no scratch; k, g 16-byte aligned.
cudaError_t timex_wgmma_gw(TimexDtype dtype, const void* k, const void* g, void* gw, int B, int C, int T,
                           cudaStream_t stream);
