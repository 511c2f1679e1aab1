// matmul-regtile (issue 29): the shipped kernel's thread layout, shared-memory stores, FMA order and
// fragment loads varied one at a time, each timed alone (CUDA events, median of 30; 10 at 8192) and
// checked against the shipped kernel's output. cuBLAS beside it: sgemm_cublas.py.
//   nvcc -arch=sm_90 -O3 -Xptxas -v -o /tmp/sgemm2 .ci/probes/sgemm_layouts.cu && /tmp/sgemm2
//   /tmp/sgemm2 once   (each kernel once at 4096^3, for ncu)
// The variants (template arguments of `tile`):
//   WARP   the threads of a warp cover 4 rows x 8 columns of thread tiles (a 32x64 piece of C) instead
//          of 2 x 16 (16x128): a k-step's fragment loads are 4 and 8 distinct float4s a warp, one
//          shared-memory wavefront each, where the shipped layout's B loads take two
//   ASTORE the A tile staged by rows tid % 128 (a warp stores 32 consecutive rows of one k: no bank
//          conflict) instead of tid / 2 (two threads of a warp on one bank)
//   JOUTER the 64 FMAs of a k-step ordered column by column instead of row by row
//   FRAGDB the next k-step's fragments loaded before this step's FMAs (two register sets)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#include "../../kernels/matmul/matmul.cu"

template <bool WARP, bool ASTORE, bool JOUTER, bool FRAGDB>
__global__ void __launch_bounds__(256, 2) tile(const float* __restrict__ A, const float* __restrict__ B,
                                              float* __restrict__ C, int M, int N, int K) {
  __shared__ __align__(16) float As[2][8][128];
  __shared__ __align__(16) float Bs[2][8][128];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int tx = WARP ? (lane % 8) + 8 * (warp % 2) : tid % 16;
  const int ty = WARP ? (lane / 8) + 4 * (warp / 2) : tid / 16;
  const int row0 = blockIdx.y * 128, col0 = blockIdx.x * 128;
  const int a_row = ASTORE ? tid % 128 : tid / 2, a_k = ASTORE ? (tid / 128) * 4 : (tid % 2) * 4;
  const int b_k = tid / 32, b_col = (tid % 32) * 4;
  const float* a_src = A + (size_t)(row0 + a_row) * K + a_k;
  const float* b_src = B + (size_t)b_k * N + col0 + b_col;
  float4 a_next = load4(a_src), b_next = load4(b_src);
  auto stage = [&](int buf) {
    As[buf][a_k + 0][a_row] = a_next.x;
    As[buf][a_k + 1][a_row] = a_next.y;
    As[buf][a_k + 2][a_row] = a_next.z;
    As[buf][a_k + 3][a_row] = a_next.w;
    *reinterpret_cast<float4*>(&Bs[buf][b_k][b_col]) = b_next;
  };
  stage(0);
  __syncthreads();
  float acc[8][8] = {};
  float4 fa[2][2], fb[2][2];
  auto fragments = [&](int slot, int buf, int kk) {
    fa[slot][0] = load4(&As[buf][kk][4 * ty]);
    fa[slot][1] = load4(&As[buf][kk][64 + 4 * ty]);
    fb[slot][0] = load4(&Bs[buf][kk][4 * tx]);
    fb[slot][1] = load4(&Bs[buf][kk][64 + 4 * tx]);
  };
  int buf = 0;
  if (FRAGDB) fragments(0, 0, 0);
  for (int k0 = 0; k0 < K; k0 += 8) {
    const bool more = k0 + 8 < K;
    if (more) {
      a_next = load4(a_src + k0 + 8);
      b_next = load4(b_src + (size_t)(k0 + 8) * N);
    }
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) {
      const int slot = FRAGDB ? kk & 1 : 0;
      if (!FRAGDB) fragments(0, buf, kk);
      else if (kk < 7) fragments(slot ^ 1, buf, kk + 1);
      const float a[8] = {fa[slot][0].x, fa[slot][0].y, fa[slot][0].z, fa[slot][0].w,
                          fa[slot][1].x, fa[slot][1].y, fa[slot][1].z, fa[slot][1].w};
      const float b[8] = {fb[slot][0].x, fb[slot][0].y, fb[slot][0].z, fb[slot][0].w,
                          fb[slot][1].x, fb[slot][1].y, fb[slot][1].z, fb[slot][1].w};
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          if (JOUTER) acc[j][i] += a[j] * b[i];
          else acc[i][j] += a[i] * b[j];
        }
    }
    if (more) {
      stage(buf ^ 1);
      __syncthreads();
      buf ^= 1;
      if (FRAGDB) fragments(0, buf, 0);
    }
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int row = row0 + (i < 4 ? 4 * ty + i : 64 + 4 * ty + i - 4);
    float* c = C + (size_t)row * N + col0;
    *reinterpret_cast<float4*>(c + 4 * tx) = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
    *reinterpret_cast<float4*>(c + 64 + 4 * tx) = make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]);
  }
}

using Kernel = void (*)(const float*, const float*, float*, int, int, int);

static float run(Kernel k, const float* A, const float* B, float* C, int n, int reps) {
  const dim3 grid(n / 128, n / 128);
  for (int i = 0; i < 3; ++i) k<<<grid, 256>>>(A, B, C, n, n, n);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<float> ts;
  for (int i = 0; i < reps; ++i) {
    cudaEventRecord(e0);
    k<<<grid, 256>>>(A, B, C, n, n, n);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    ts.push_back(ms);
  }
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}

int main(int argc, char** argv) {
  const bool once = argc > 1 && !strcmp(argv[1], "once");
  struct V { const char* name; Kernel k; } vs[] = {
      {"shipped", matmul_regtile},
      {"base (bounds 256,2)", tile<false, false, false, false>},
      {"WARP", tile<true, false, false, false>},
      {"ASTORE", tile<false, true, false, false>},
      {"JOUTER", tile<false, false, true, false>},
      {"FRAGDB", tile<false, false, false, true>},
      {"WARP+ASTORE", tile<true, true, false, false>},
      {"WARP+FRAGDB", tile<true, false, false, true>},
      {"WARP+ASTORE+FRAGDB", tile<true, true, false, true>},
      {"all four", tile<true, true, true, true>},
      {"shipped again", matmul_regtile}};
  for (int n : {4096, 2048, 8192}) {
    if (once && n != 4096) continue;
    const size_t bytes = (size_t)n * n * 4;
    std::vector<float> h((size_t)n * n);
    float *A, *B, *C0, *C;
    cudaMalloc(&A, bytes);
    cudaMalloc(&B, bytes);
    cudaMalloc(&C0, bytes);
    cudaMalloc(&C, bytes);
    srand(1);
    for (auto& x : h) x = rand() / (float)RAND_MAX - 0.5f;
    cudaMemcpy(A, h.data(), bytes, cudaMemcpyHostToDevice);
    for (auto& x : h) x = rand() / (float)RAND_MAX - 0.5f;
    cudaMemcpy(B, h.data(), bytes, cudaMemcpyHostToDevice);
    std::vector<float> ref((size_t)n * n), got((size_t)n * n);
    for (auto& v : vs) {
      const bool first = v.k == matmul_regtile;
      if (once) {
        v.k<<<dim3(n / 128, n / 128), 256>>>(A, B, C, n, n, n);
        cudaDeviceSynchronize();
        continue;
      }
      const float ms = run(v.k, A, B, first ? C0 : C, n, n == 8192 ? 10 : 30);
      const cudaError_t err = cudaDeviceSynchronize();
      double worst = 0;
      if (first) {
        cudaMemcpy(ref.data(), C0, bytes, cudaMemcpyDeviceToHost);
      } else {
        cudaMemcpy(got.data(), C, bytes, cudaMemcpyDeviceToHost);
        for (size_t i = 0; i < got.size(); i += 97) worst = std::max(worst, (double)std::abs(got[i] - ref[i]));
        cudaMemset(C, 0, bytes);
      }
      printf("n=%d %-20s %8.3f ms %6.1f TFLOP/s  maxdiff %.2e %s\n", n, v.name, ms,
             2.0 * n * n * (double)n / ms / 1e9, worst, err ? cudaGetErrorString(err) : "");
    }
    cudaFree(A);
    cudaFree(B);
    cudaFree(C0);
    cudaFree(C);
  }
}
