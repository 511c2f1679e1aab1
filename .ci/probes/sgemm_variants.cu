// SGEMM variants tried for matmul-regtile (issue 29), each timed alone (CUDA events, median of 30; 10 at
// 8192) at 4096^3, 2048^3 and 8192^3 and checked against v0 (the shipped kernel). cuBLAS beside it:
// sgemm_cublas.py. Results: docs/benchmarks/h100-hopper.md, "matmul-regtile".
//   nvcc -arch=sm_90 -O3 -o /tmp/sgemm .ci/probes/sgemm_variants.cu && /tmp/sgemm
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

// v0: the shipped kernel itself (matmul_regtile: BK 8, register staging, A transposed), so the table's
// "shipped" row is what ships
#include "../../kernels/matmul/matmul.cu"
// (load4 comes from there too)

// v0g: v0 with blocks ordered in groups of G block-rows (L2 reuse of the B panels)
template <int G>
__global__ void __launch_bounds__(256) v0g(const float* __restrict__ A, const float* __restrict__ B,
                                          float* __restrict__ C, int M, int N, int K) {
  __shared__ __align__(16) float As[2][8][128];
  __shared__ __align__(16) float Bs[2][8][128];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int nb = gridDim.x, mb = gridDim.y, id = blockIdx.y * nb + blockIdx.x;
  const int group = id / (G * nb), first = group * G, rows = min(G, mb - first);
  const int by = first + (id % (G * nb)) % rows, bx = (id % (G * nb)) / rows;
  const int row0 = by * 128, col0 = bx * 128;
  const int a_row = tid / 2, a_k = (tid % 2) * 4;
  const int b_k = tid / 32, b_col = (tid % 32) * 4;
  const float* a_src = A + (size_t)(row0 + a_row) * K + a_k;
  const float* b_src = B + (size_t)b_k * N + col0 + b_col;
  float4 a_next = load4(a_src), b_next = load4(b_src);
  auto stage = [&](int buf) {
    As[buf][a_k + 0][a_row] = a_next.x; As[buf][a_k + 1][a_row] = a_next.y;
    As[buf][a_k + 2][a_row] = a_next.z; As[buf][a_k + 3][a_row] = a_next.w;
    *reinterpret_cast<float4*>(&Bs[buf][b_k][b_col]) = b_next;
  };
  stage(0);
  __syncthreads();
  float acc[8][8] = {};
  int buf = 0;
  for (int k0 = 0; k0 < K; k0 += 8) {
    const bool more = k0 + 8 < K;
    if (more) { a_next = load4(a_src + k0 + 8); b_next = load4(b_src + (size_t)(k0 + 8) * N); }
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) {
      const float4 a0 = load4(&As[buf][kk][4 * ty]), a1 = load4(&As[buf][kk][64 + 4 * ty]);
      const float4 b0 = load4(&Bs[buf][kk][4 * tx]), b1 = load4(&Bs[buf][kk][64 + 4 * tx]);
      const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] += a[i] * b[j];
    }
    if (more) { stage(buf ^ 1); __syncthreads(); buf ^= 1; }
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int row = row0 + (i < 4 ? 4 * ty + i : 64 + 4 * ty + i - 4);
    float* c = C + (size_t)row * N + col0;
    *reinterpret_cast<float4*>(c + 4 * tx) = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
    *reinterpret_cast<float4*>(c + 64 + 4 * tx) = make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]);
  }
}

// v1: BK 16, register staging (two float4 of A and of B per thread), A transposed
template <int BK, int MINB = 2>
__global__ void __launch_bounds__(256, MINB) v1(const float* __restrict__ A, const float* __restrict__ B,
                                             float* __restrict__ C, int M, int N, int K) {
  constexpr int R = BK / 8;  // float4 of A (and of B) per thread
  __shared__ __align__(16) float As[2][BK][128];
  __shared__ __align__(16) float Bs[2][BK][128];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int row0 = blockIdx.y * 128, col0 = blockIdx.x * 128;
  float4 an[R], bn[R];
  auto fetch = [&](int k0) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int idx = tid + 256 * r;
      an[r] = load4(A + (size_t)(row0 + idx / (BK / 4)) * K + k0 + (idx % (BK / 4)) * 4);
      bn[r] = load4(B + (size_t)(k0 + idx / 32) * N + col0 + (idx % 32) * 4);
    }
  };
  auto stage = [&](int buf) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int idx = tid + 256 * r, ar = idx / (BK / 4), ak = (idx % (BK / 4)) * 4;
      As[buf][ak + 0][ar] = an[r].x; As[buf][ak + 1][ar] = an[r].y;
      As[buf][ak + 2][ar] = an[r].z; As[buf][ak + 3][ar] = an[r].w;
      *reinterpret_cast<float4*>(&Bs[buf][idx / 32][(idx % 32) * 4]) = bn[r];
    }
  };
  fetch(0);
  stage(0);
  __syncthreads();
  float acc[8][8] = {};
  int buf = 0;
  for (int k0 = 0; k0 < K; k0 += BK) {
    const bool more = k0 + BK < K;
    if (more) fetch(k0 + BK);
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      const float4 a0 = load4(&As[buf][kk][4 * ty]), a1 = load4(&As[buf][kk][64 + 4 * ty]);
      const float4 b0 = load4(&Bs[buf][kk][4 * tx]), b1 = load4(&Bs[buf][kk][64 + 4 * tx]);
      const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] += a[i] * b[j];
    }
    if (more) { stage(buf ^ 1); __syncthreads(); buf ^= 1; }
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int row = row0 + (i < 4 ? 4 * ty + i : 64 + 4 * ty + i - 4);
    float* c = C + (size_t)row * N + col0;
    *reinterpret_cast<float4*>(c + 4 * tx) = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
    *reinterpret_cast<float4*>(c + 64 + 4 * tx) = make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]);
  }
}


// v5: 256x128 block tile (as cuBLAS's SGEMM here), 16x8 outputs per thread, one block per SM
template <int STAGE_B = 1>
__global__ void __launch_bounds__(256, 1) v5(const float* __restrict__ A, const float* __restrict__ B,
                                             float* __restrict__ C, int M, int N, int K) {
  __shared__ __align__(16) float As[2][8][256];
  __shared__ __align__(16) float Bs[2][8][128];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int row0 = blockIdx.y * 256, col0 = blockIdx.x * 128;
  const int b_k = tid / 32, b_col = (tid % 32) * 4;
  float4 an[2], bn;
  auto fetch = [&](int k0) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int idx = tid + 256 * r;
      an[r] = load4(A + (size_t)(row0 + idx / 2) * K + k0 + (idx % 2) * 4);
    }
    bn = load4(B + (size_t)(k0 + b_k) * N + col0 + b_col);
  };
  auto stage = [&](int buf) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int idx = tid + 256 * r, ar = idx / 2, ak = (idx % 2) * 4;
      As[buf][ak + 0][ar] = an[r].x; As[buf][ak + 1][ar] = an[r].y;
      As[buf][ak + 2][ar] = an[r].z; As[buf][ak + 3][ar] = an[r].w;
    }
    *reinterpret_cast<float4*>(&Bs[buf][b_k][b_col]) = bn;
  };
  fetch(0);
  stage(0);
  __syncthreads();
  float acc[16][8] = {};
  int buf = 0;
  for (int k0 = 0; k0 < K; k0 += 8) {
    const bool more = k0 + 8 < K;
    if (more) fetch(k0 + 8);
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) {
      float a[16];
#pragma unroll
      for (int g = 0; g < 4; ++g) {
        const float4 v = load4(&As[buf][kk][64 * g + 4 * ty]);
        a[4 * g] = v.x; a[4 * g + 1] = v.y; a[4 * g + 2] = v.z; a[4 * g + 3] = v.w;
      }
      const float4 b0 = load4(&Bs[buf][kk][4 * tx]), b1 = load4(&Bs[buf][kk][64 + 4 * tx]);
      const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int i = 0; i < 16; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] += a[i] * b[j];
    }
    if (more) { stage(buf ^ 1); __syncthreads(); buf ^= 1; }
  }
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const int row = row0 + 64 * (i / 4) + 4 * ty + i % 4;
    float* c = C + (size_t)row * N + col0;
    *reinterpret_cast<float4*>(c + 4 * tx) = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
    *reinterpret_cast<float4*>(c + 64 + 4 * tx) = make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]);
  }
}

__device__ __forceinline__ void cp16(void* dst, const void* src) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(src));
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void wait_groups() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// v3: cp.async, S stages of BK 16, A row-major in shared memory (read as float4 along k)
template <int S, int MINB = 2>
__global__ void __launch_bounds__(256, MINB) v3(const float* __restrict__ A, const float* __restrict__ B,
                                             float* __restrict__ C, int M, int N, int K) {
  constexpr int BK = 16;
  extern __shared__ __align__(16) float smem[];
  float (*As)[128][BK] = reinterpret_cast<float (*)[128][BK]>(smem);
  float (*Bs)[BK][128] = reinterpret_cast<float (*)[BK][128]>(smem + S * 128 * BK);
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int row0 = blockIdx.y * 128, col0 = blockIdx.x * 128;
  const int tiles = K / BK;
  auto load = [&](int st, int k0) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int idx = tid + 256 * r;
      cp16(&As[st][idx / 4][(idx % 4) * 4], A + (size_t)(row0 + idx / 4) * K + k0 + (idx % 4) * 4);
      cp16(&Bs[st][idx / 32][(idx % 32) * 4], B + (size_t)(k0 + idx / 32) * N + col0 + (idx % 32) * 4);
    }
  };
#pragma unroll
  for (int s = 0; s < S - 1; ++s) {
    if (s < tiles) load(s, s * BK);
    commit();
  }
  float acc[8][8] = {};
  for (int t = 0; t < tiles; ++t) {
    wait_groups<S - 2>();
    __syncthreads();
    if (t + S - 1 < tiles) load((t + S - 1) % S, (t + S - 1) * BK);
    commit();
    const int st = t % S;
#pragma unroll
    for (int k4 = 0; k4 < BK / 4; ++k4) {
      float4 a4[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) a4[i] = load4(&As[st][i < 4 ? 4 * ty + i : 64 + 4 * ty + i - 4][4 * k4]);
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int kk = 4 * k4 + q;
        const float4 b0 = load4(&Bs[st][kk][4 * tx]), b1 = load4(&Bs[st][kk][64 + 4 * tx]);
        const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const float a = q == 0 ? a4[i].x : q == 1 ? a4[i].y : q == 2 ? a4[i].z : a4[i].w;
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[i][j] += a * b[j];
        }
      }
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

static const auto v1b = v1<16, 1>;
typedef void (*Kernel)(const float*, const float*, float*, int, int, int);
static const Kernel v0 = matmul_regtile;

static float run(Kernel k, size_t smem, const float* A, const float* B, float* C, int n, int reps, int bm = 128) {
  dim3 grid(n / 128, n / bm);
  if (smem > 48 * 1024) cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  for (int i = 0; i < 3; ++i) k<<<grid, 256, smem>>>(A, B, C, n, n, n);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  std::vector<float> ts;
  for (int i = 0; i < reps; ++i) {
    cudaEventRecord(e0); k<<<grid, 256, smem>>>(A, B, C, n, n, n); cudaEventRecord(e1); cudaEventSynchronize(e1);
    float ms; cudaEventElapsedTime(&ms, e0, e1); ts.push_back(ms);
  }
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}

#include <algorithm>
int main() {
  for (int n : {4096, 2048, 8192}) {
    size_t bytes = (size_t)n * n * 4;
    std::vector<float> h(n * (size_t)n);
    float *A, *B, *C0, *C;
    cudaMalloc(&A, bytes); cudaMalloc(&B, bytes); cudaMalloc(&C0, bytes); cudaMalloc(&C, bytes);
    srand(1);
    for (auto& x : h) x = rand() / (float)RAND_MAX - 0.5f;
    cudaMemcpy(A, h.data(), bytes, cudaMemcpyHostToDevice);
    for (auto& x : h) x = rand() / (float)RAND_MAX - 0.5f;
    cudaMemcpy(B, h.data(), bytes, cudaMemcpyHostToDevice);
    struct V { const char* name; Kernel k; size_t smem; int bm = 128; } vs[] = {
        {"v0 (shipped)", v0, 0}, 

        {"v1 BK16", v1<16>, 0}, {"v1 BK16 1blk", v1b, 0},
        {"v3 cp.async S2", v3<2>, 2 * 2 * 128 * 16 * 4}, {"v3 cp.async S3", v3<3>, 3 * 2 * 128 * 16 * 4},
        {"v3 cp.async S4", v3<4>, 4 * 2 * 128 * 16 * 4}, {"v3 S3 1blk/SM", v3<3, 1>, 3 * 2 * 128 * 16 * 4},
        {"v0g G4", v0g<4>, 0}, {"v0g G8", v0g<8>, 0}, {"v0g G16", v0g<16>, 0},
        {"v5 256x128", v5<1>, 0, 256}, {"v0 again", v0, 0}};
    std::vector<float> ref(n * (size_t)n), got(n * (size_t)n);
    for (auto& v : vs) {
      float ms = run(v.k, v.smem, A, B, v.k == v0 ? C0 : C, n, n == 8192 ? 10 : 30, v.bm);
      cudaError_t err = cudaDeviceSynchronize();
      double worst = 0;
      if (v.k == v0) cudaMemcpy(ref.data(), C0, bytes, cudaMemcpyDeviceToHost);
      else {
        cudaMemcpy(got.data(), C, bytes, cudaMemcpyDeviceToHost);
        for (size_t i = 0; i < got.size(); i += 97) worst = std::max(worst, (double)fabsf(got[i] - ref[i]));
        cudaMemset(C, 0, bytes);
      }
      printf("n=%d %-16s %8.3f ms %6.1f TFLOP/s  maxdiff %.2e %s\n", n, v.name, ms, 2.0 * n * n * (double)n / ms / 1e9,
             worst, err ? cudaGetErrorString(err) : "");
    }
    cudaFree(A); cudaFree(B); cudaFree(C0); cudaFree(C);
  }
}
