// attn-naive: the score matrix materialised in global memory, one thread per element of each product.
#include <cfloat>

#include "attention.h"

namespace {

constexpr int THREADS = 256;

unsigned blocks_for(size_t n) { return (unsigned)((n + THREADS - 1) / THREADS); }

// C[bh, i, j] = scale * sum_d A[bh, i, d] B[bh, j, d], or -inf above the diagonal when causal.
__global__ void a_bt(const float* __restrict__ A, const float* __restrict__ Bm, float* __restrict__ C, float scale,
                     bool causal, int N, int D) {
  const size_t bh = blockIdx.y, e = blockIdx.x * (size_t)THREADS + threadIdx.x;
  if (e >= (size_t)N * N) return;
  const int i = (int)(e / N), j = (int)(e % N);
  float s = 0.f;
  if (!(causal && j > i)) {
    const float* a = A + (bh * N + i) * D;
    const float* b = Bm + (bh * N + j) * D;
    for (int d = 0; d < D; ++d) s += a[d] * b[d];
    s *= scale;
  } else {
    s = -INFINITY;
  }
  C[bh * N * N + e] = s;
}

// Row-wise softmax in place, one block per row of N; -inf entries become 0.
__global__ void softmax_rows(float* __restrict__ P, int N) {
  __shared__ float part[THREADS];
  float* row = P + (blockIdx.y * (size_t)gridDim.x + blockIdx.x) * N;
  float m = -INFINITY;
  for (int j = threadIdx.x; j < N; j += THREADS) m = fmaxf(m, row[j]);
  part[threadIdx.x] = m;
  __syncthreads();
  for (int s = THREADS / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) part[threadIdx.x] = fmaxf(part[threadIdx.x], part[threadIdx.x + s]);
    __syncthreads();
  }
  m = part[0];
  __syncthreads();
  float sum = 0.f;
  for (int j = threadIdx.x; j < N; j += THREADS) {
    const float e = row[j] == -INFINITY ? 0.f : expf(row[j] - m);
    row[j] = e;
    sum += e;
  }
  part[threadIdx.x] = sum;
  __syncthreads();
  for (int s = THREADS / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  const float inv = 1.f / part[0];
  for (int j = threadIdx.x; j < N; j += THREADS) row[j] *= inv;
}

// C[bh, i, c] = sum_j P[bh, i, j] X[bh, j, c]   (out = P V, dQ = dS K)
__global__ void p_x(const float* __restrict__ P, const float* __restrict__ X, float* __restrict__ C, int N, int D) {
  const size_t bh = blockIdx.y, e = blockIdx.x * (size_t)THREADS + threadIdx.x;
  if (e >= (size_t)N * D) return;
  const int i = (int)(e / D), c = (int)(e % D);
  const float* p = P + (bh * N + i) * N;
  const float* x = X + bh * N * D + c;
  float s = 0.f;
  for (int j = 0; j < N; ++j) s += p[j] * x[(size_t)j * D];
  C[bh * N * D + e] = s;
}

// C[bh, j, c] = sum_i P[bh, i, j] X[bh, i, c]   (dV = P^T dO, dK = dS^T Q)
__global__ void pt_x(const float* __restrict__ P, const float* __restrict__ X, float* __restrict__ C, int N, int D) {
  const size_t bh = blockIdx.y, e = blockIdx.x * (size_t)THREADS + threadIdx.x;
  if (e >= (size_t)N * D) return;
  const int j = (int)(e / D), c = (int)(e % D);
  const float* p = P + bh * N * N + j;
  const float* x = X + bh * N * D + c;
  float s = 0.f;
  for (int i = 0; i < N; ++i) s += p[(size_t)i * N] * x[(size_t)i * D];
  C[bh * N * D + e] = s;
}

// rows[bh, i] = sum_c dO[bh, i, c] O[bh, i, c]
__global__ void row_dot(const float* __restrict__ dO, const float* __restrict__ O, float* __restrict__ rows,
                        size_t count, int D) {
  const size_t r = blockIdx.x * (size_t)THREADS + threadIdx.x;
  if (r >= count) return;
  float s = 0.f;
  for (int c = 0; c < D; ++c) s += dO[r * D + c] * O[r * D + c];
  rows[r] = s;
}

// dP := P * (dP - rows[i]) * scale, in place: the gradient of the scores.
__global__ void score_grad(const float* __restrict__ P, float* __restrict__ dP, const float* __restrict__ rows,
                           float scale, int N) {
  const size_t bh = blockIdx.y, e = blockIdx.x * (size_t)THREADS + threadIdx.x;
  if (e >= (size_t)N * N) return;
  const size_t at = bh * N * N + e;
  dP[at] = P[at] * (dP[at] - rows[bh * N + e / N]) * scale;
}

}  // namespace

const char* attention_unsupported(int B, int H, int N, int D) {
  if (B <= 0 || H <= 0 || N <= 0 || D <= 0) return "B, H, N and D must be positive";
  if ((long long)B * H > 65535) return "B * H must be at most 65535 (the grid's y dimension)";
  if ((long long)N * N / THREADS >= (1LL << 31)) return "N is too large for one grid row per (batch, head)";
  return nullptr;
}

const char* attention_flash_unsupported(int D) {
  return D == 64 || D == 128 ? nullptr : "attn-flash1 and attn-flash2 take head dimension D = 64 or 128";
}

cudaError_t attention_naive_forward(const float* q, const float* k, const float* v, float* out, float* P, float scale,
                                    bool causal, int BH, int N, int D, cudaStream_t stream) {
  a_bt<<<dim3(blocks_for((size_t)N * N), BH), THREADS, 0, stream>>>(q, k, P, scale, causal, N, D);
  softmax_rows<<<dim3(N, BH), THREADS, 0, stream>>>(P, N);
  p_x<<<dim3(blocks_for((size_t)N * D), BH), THREADS, 0, stream>>>(P, v, out, N, D);
  return cudaGetLastError();
}

cudaError_t attention_naive_backward(const float* q, const float* k, const float* v, const float* out,
                                     const float* P, const float* dout, float* dq, float* dk, float* dv, float* dP,
                                     float* rows, float scale, int BH, int N, int D, cudaStream_t stream) {
  const dim3 scores(blocks_for((size_t)N * N), BH), values(blocks_for((size_t)N * D), BH);
  pt_x<<<values, THREADS, 0, stream>>>(P, dout, dv, N, D);
  a_bt<<<scores, THREADS, 0, stream>>>(dout, v, dP, 1.f, false, N, D);
  row_dot<<<blocks_for((size_t)BH * N), THREADS, 0, stream>>>(dout, out, rows, (size_t)BH * N, D);
  score_grad<<<scores, THREADS, 0, stream>>>(P, dP, rows, scale, N);
  p_x<<<values, THREADS, 0, stream>>>(dP, k, dq, N, D);
  pt_x<<<values, THREADS, 0, stream>>>(dP, q, dk, N, D);
  return cudaGetLastError();
}
