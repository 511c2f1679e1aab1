// attn-flash1: FlashAttention's tiling (the v1 schedule) in float32 on CUDA cores, no tensor cores.
//
// Forward: a block owns 64 query rows and streams 64-key tiles of K and V through shared memory past
// them. Per tile it computes S = Q Kᵀ, updates each row's running max and sum (online softmax, base 2)
// and adds P V to an accumulator that lives in registers; only out and each row's log-sum-exp reach
// global memory. Backward, without atomics: delta = rowsum(dO * out); then a block per key tile walks
// the query tiles that see it, recomputing P from the log-sum-exp, and sums dV = Pᵀ dO and dK = dSᵀ Q
// in registers; then a block per query tile walks the key tiles it sees and sums dQ = dS K.
//
// Register blocking: 256 threads form a 16 x 16 grid. Thread (a, b) owns rows a + 16r and keys b + 16c
// (r, c < 4) of a 64 x 64 score tile, and the same rows x float4 columns b + 16h of a 64 x D product
// tile, so each inner step does 8 to 11 FMAs per float4 it reads from shared memory. Tiles are row-major
// with rows padded by 4 floats: the distinct rows a warp reads at one column start 4 banks apart, and
// with the strided ownership its float4 reads are free of bank conflicts. In a warp, a = 2 * warp +
// lane % 2 and b = lane / 2: lanes n and n ^ 1 read the same b-side float4 and lanes n and n ^ 2 the
// same a-side one, a pattern for which the hardware can return a float4 read in 2 passes instead of 4.
// The 16 threads of a row are the lanes of one parity in a warp, so row reductions are shuffles.
#include <algorithm>

#include <cuda_runtime.h>

#include "attention.h"

namespace {

constexpr int TILE = 64;             // query rows per query tile, keys per key tile
constexpr int THREADS = 256;         // a 16 x 16 grid of threads
constexpr int GRID = 16;             // the thread grid's side
constexpr int PER = TILE / GRID;     // rows (or keys) per thread: 4
constexpr int LDS = TILE + 4;        // row stride of a 64 x 64 score-shaped tile (P, dS), floats
constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;

// A 64-row tile of one head's (N, D) matrix in shared memory.
template <int D>
struct Rows {
  static constexpr int LD = D + 4;            // padded row stride, floats (16-byte aligned)
  static constexpr int FLOATS = TILE * LD;    // >= TILE * LDS, so a score tile fits in its place
  static constexpr int CHUNKS = D / 4 / GRID; // float4 columns per thread in a 64 x D product: 1 or 2
  static_assert(FLOATS >= TILE * LDS && D % (4 * GRID) == 0, "D must be a multiple of 64");
};

__device__ __forceinline__ float part(const float4& v, int e) {
  return e == 0 ? v.x : e == 1 ? v.y : e == 2 ? v.z : v.w;
}

// Rows row0 .. row0+63 of a head's (N, D) matrix into a padded tile; rows past N become zeros, so that
// masked keys meet finite values (0 * garbage could be NaN) and padded query rows stay harmless.
template <int D>
__device__ __forceinline__ void load_rows(float* tile, const float* __restrict__ head, int row0, int N) {
  constexpr int C4 = D / 4, LD4 = Rows<D>::LD / 4;
  const float4* src = reinterpret_cast<const float4*>(head);
  float4* dst = reinterpret_cast<float4*>(tile);
#pragma unroll
  for (int it = 0; it < TILE * C4 / THREADS; ++it) {
    const int f = it * THREADS + threadIdx.x, r = f / C4, c = f % C4;
    float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
    if (row0 + r < N) x = __ldg(src + (size_t)(row0 + r) * C4 + c);
    dst[r * LD4 + c] = x;
  }
}

// s[r][c] += A[a + 16r, :] . B[b + 16c, :] over the D columns of two padded 64-row tiles.
// Per column quad: 4 + 4 float4 reads, 64 FMAs. UNROLL trades overlap for registers (no spills at 128).
template <int D, int UNROLL>
__device__ __forceinline__ void dot_rows(float (&s)[PER][PER], const float* A, const float* B, int a, int b) {
  constexpr int LD4 = Rows<D>::LD / 4;
  const float4* A4 = reinterpret_cast<const float4*>(A) + a * LD4;
  const float4* B4 = reinterpret_cast<const float4*>(B) + b * LD4;
#pragma unroll UNROLL
  for (int d = 0; d < D / 4; ++d) {
    float4 x[PER], y[PER];
#pragma unroll
    for (int r = 0; r < PER; ++r) x[r] = A4[r * GRID * LD4 + d];
#pragma unroll
    for (int c = 0; c < PER; ++c) y[c] = B4[c * GRID * LD4 + d];
#pragma unroll
    for (int r = 0; r < PER; ++r)
#pragma unroll
      for (int c = 0; c < PER; ++c) {
        s[r][c] = fmaf(x[r].x, y[c].x, s[r][c]);
        s[r][c] = fmaf(x[r].y, y[c].y, s[r][c]);
        s[r][c] = fmaf(x[r].z, y[c].z, s[r][c]);
        s[r][c] = fmaf(x[r].w, y[c].w, s[r][c]);
      }
  }
}

// o[r][h] += sum_k S[a + 16r, k] B[k, float4 column b + 16h], k < 64: S a score-shaped tile (stride
// LDS), B a padded 64-row tile. Per key quad: 4 + 4 * CHUNKS float4 reads, 64 * CHUNKS FMAs.
template <int D>
__device__ __forceinline__ void acc_rows(float4 (&o)[PER][Rows<D>::CHUNKS], const float* S, const float* B, int a,
                                         int b) {
  constexpr int LD4 = Rows<D>::LD / 4, H = Rows<D>::CHUNKS;
  const float4* S4 = reinterpret_cast<const float4*>(S) + a * (LDS / 4);
  const float4* B4 = reinterpret_cast<const float4*>(B) + b;
#pragma unroll 4
  for (int k = 0; k < TILE / 4; ++k) {
    float4 x[PER];
#pragma unroll
    for (int r = 0; r < PER; ++r) x[r] = S4[r * GRID * (LDS / 4) + k];
#pragma unroll
    for (int e = 0; e < 4; ++e)
#pragma unroll
      for (int h = 0; h < H; ++h) {
        const float4 y = B4[(4 * k + e) * LD4 + h * GRID];
#pragma unroll
        for (int r = 0; r < PER; ++r) {
          const float w = part(x[r], e);
          o[r][h].x = fmaf(w, y.x, o[r][h].x);
          o[r][h].y = fmaf(w, y.y, o[r][h].y);
          o[r][h].z = fmaf(w, y.z, o[r][h].z);
          o[r][h].w = fmaf(w, y.w, o[r][h].w);
        }
      }
  }
}

// The thread's place in the 16 x 16 grid (see the top of the file).
__device__ __forceinline__ int grid_a() { return (int)(threadIdx.x / 32 * 2 + threadIdx.x % 2); }
__device__ __forceinline__ int grid_b() { return (int)(threadIdx.x % 32 / 2); }

// Sum or max over the 16 threads of a row (lanes of one parity). Every lane must call these.
__device__ __forceinline__ float row_max(float x) {
#pragma unroll
  for (int o = 16; o > 1; o /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ __forceinline__ float row_sum(float x) {
#pragma unroll
  for (int o = 16; o > 1; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Whether key j is hidden from query i; only evaluated in tiles that touch the diagonal or the end.
// Query rows past N are not masked here: the forward lets them see key 0, so they stay finite.
__device__ __forceinline__ bool masked(int i, int j, int N, bool causal) { return j >= N || (causal && j > i); }

// Forward. Grid (query tiles, BH); x counts down from the last query tile, which has the most causal
// work, so the heaviest blocks start first. scale2 = scale * log2(e): scores live in base 2.
template <int D>
__global__ void __launch_bounds__(THREADS, 2)
    flash1_fwd(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
               float* __restrict__ out, float* __restrict__ lse, float scale2, bool causal, int N) {
  constexpr int H = Rows<D>::CHUNKS;
  extern __shared__ float4 smem4[];
  float* Qs = reinterpret_cast<float*>(smem4);
  float* Ks = Qs + Rows<D>::FLOATS;  // K, then P once the scores are in registers
  float* Vs = Ks + Rows<D>::FLOATS;
  const int a = grid_a(), b = grid_b();
  const int tiles = (N + TILE - 1) / TILE, qt = tiles - 1 - blockIdx.x, q0 = qt * TILE;
  const size_t head = (size_t)blockIdx.y * N * D;

  load_rows<D>(Qs, q + head, q0, N);
  float4 o[PER][H];
  float m[PER], l[PER];  // running max (base 2, scaled) and this thread's share of the running sum
#pragma unroll
  for (int r = 0; r < PER; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.f;
#pragma unroll
    for (int h = 0; h < H; ++h) o[r][h] = make_float4(0.f, 0.f, 0.f, 0.f);
  }

  // Key tile 0 comes first: it holds key 0, which every row sees, so m is finite from then on and
  // a row with every key of a later tile masked just gets p = 0 and alpha = 1.
  const int kt_end = causal ? qt + 1 : tiles;
  for (int kt = 0; kt < kt_end; ++kt) {
    const int k0 = kt * TILE;
    if (kt > 0) __syncthreads();  // the last tile's P V is done with Ks and Vs
    load_rows<D>(Ks, k + head, k0, N);
    load_rows<D>(Vs, v + head, k0, N);
    __syncthreads();

    float s[PER][PER] = {};
    dot_rows<D, 4>(s, Qs, Ks, a, b);
    const bool edge = k0 + TILE > N || (causal && kt == qt);
#pragma unroll
    for (int r = 0; r < PER; ++r) {
      float mx = -INFINITY;
#pragma unroll
      for (int c = 0; c < PER; ++c) {
        s[r][c] *= scale2;
        if (edge && masked(q0 + a + GRID * r, k0 + b + GRID * c, N, causal)) s[r][c] = -INFINITY;
        mx = fmaxf(mx, s[r][c]);
      }
      const float m_new = fmaxf(m[r], row_max(mx));
      const float alpha = exp2f(m[r] - m_new);  // 0 on the first tile (m = -inf)
      m[r] = m_new;
      float sum = 0.f;
#pragma unroll
      for (int c = 0; c < PER; ++c) {
        s[r][c] = exp2f(s[r][c] - m_new);
        sum += s[r][c];
      }
      // alpha is the same on the whole row, so the per-thread shares of l are summed only at the end.
      l[r] = l[r] * alpha + sum;
#pragma unroll
      for (int h = 0; h < H; ++h) {
        o[r][h].x *= alpha;
        o[r][h].y *= alpha;
        o[r][h].z *= alpha;
        o[r][h].w *= alpha;
      }
    }

    __syncthreads();  // every thread is done reading K before P overwrites it
#pragma unroll
    for (int r = 0; r < PER; ++r)
#pragma unroll
      for (int c = 0; c < PER; ++c) Ks[(a + GRID * r) * LDS + b + GRID * c] = s[r][c];
    __syncthreads();
    acc_rows<D>(o, Ks, Vs, a, b);
  }

#pragma unroll
  for (int r = 0; r < PER; ++r) {
    const float sum = row_sum(l[r]);
    const int i = q0 + a + GRID * r;
    if (i < N) {
      const float inv = 1.f / sum;
      float4* dst = reinterpret_cast<float4*>(out + head + (size_t)i * D) + b;
#pragma unroll
      for (int h = 0; h < H; ++h)
        dst[h * GRID] = make_float4(o[r][h].x * inv, o[r][h].y * inv, o[r][h].z * inv, o[r][h].w * inv);
      if (b == 0) lse[(size_t)blockIdx.y * N + i] = m[r] * LN2 + logf(sum);
    }
  }
}

// delta[row] = sum_c dout[row, c] * out[row, c]; D / 4 lanes per row, one float4 each.
template <int D>
__global__ void __launch_bounds__(THREADS) flash1_delta(const float* __restrict__ out, const float* __restrict__ dout,
                                                       float* __restrict__ delta, size_t rows) {
  constexpr int LANES = D / 4;
  const size_t t = blockIdx.x * (size_t)THREADS + threadIdx.x, row = t / LANES;
  float s = 0.f;
  if (row < rows) {
    const float4 x = __ldg(reinterpret_cast<const float4*>(out) + t);
    const float4 y = __ldg(reinterpret_cast<const float4*>(dout) + t);
    s = x.x * y.x + x.y * y.y + x.z * y.z + x.w * y.w;
  }
#pragma unroll
  for (int o = LANES / 2; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (row < rows && t % LANES == 0) delta[row] = s;
}

// The recomputed P and dS of one (query tile, key tile) pair, for thread (a, b): rows q0 + a + 16r, keys
// k0 + b + 16c. lse2 and dl are the thread's rows' lse * log2(e) and delta.
template <int D>
__device__ __forceinline__ void probs_and_grads(float (&p)[PER][PER], float (&ds)[PER][PER], const float* Qs,
                                                const float* Ks, const float* dOs, const float* Vs,
                                                const float (&lse2)[PER], const float (&dl)[PER], float scale2,
                                                bool causal, int q0, int k0, int N, int a, int b) {
#pragma unroll
  for (int r = 0; r < PER; ++r)
#pragma unroll
    for (int c = 0; c < PER; ++c) p[r][c] = ds[r][c] = 0.f;
  dot_rows<D, 2>(p, Qs, Ks, a, b);   // S
  dot_rows<D, 2>(ds, dOs, Vs, a, b); // dP = dO Vᵀ
  const bool edge = q0 + TILE > N || k0 + TILE > N || (causal && q0 == k0);
#pragma unroll
  for (int r = 0; r < PER; ++r)
#pragma unroll
    for (int c = 0; c < PER; ++c) {
      float pr = exp2f(p[r][c] * scale2 - lse2[r]);
      // assigned, not multiplied: a masked score may exceed lse and overflow to inf
      const int i = q0 + a + GRID * r;
      if (edge && (i >= N || masked(i, k0 + b + GRID * c, N, causal))) pr = 0.f;
      p[r][c] = pr;
      ds[r][c] = pr * (ds[r][c] - dl[r]);
    }
}

// The thread's rows' lse (in base 2) and delta; zeros for rows past N (their P is masked anyway).
__device__ __forceinline__ void row_stats(float (&lse2)[PER], float (&dl)[PER], const float* __restrict__ lse,
                                          const float* __restrict__ delta, size_t base, int q0, int N, int a) {
#pragma unroll
  for (int r = 0; r < PER; ++r) {
    const int i = q0 + a + GRID * r;
    lse2[r] = i < N ? __ldg(lse + base + i) * LOG2E : 0.f;
    dl[r] = i < N ? __ldg(delta + base + i) : 0.f;
  }
}

// dK and dV for one key tile. Grid (key tiles, BH); with causal masking key tile kt sees query tiles
// kt .. end, so low x is the heavy end and runs first. K and V stay in shared memory; Q and dO stream.
// P and dS are stored transposed (key-major), so dV = Pᵀ dO and dK = dSᵀ Q read them as score tiles.
template <int D>
__global__ void __launch_bounds__(THREADS, D == 64 ? 2 : 1)
    flash1_dkdv(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                const float* __restrict__ dout, const float* __restrict__ lse, const float* __restrict__ delta,
                float* __restrict__ dk, float* __restrict__ dv, float scale2, float scale, bool causal, int N) {
  constexpr int H = Rows<D>::CHUNKS;
  extern __shared__ float4 smem4[];
  float* Ks = reinterpret_cast<float*>(smem4);
  float* Vs = Ks + Rows<D>::FLOATS;
  float* Qs = Vs + Rows<D>::FLOATS;
  float* dOs = Qs + Rows<D>::FLOATS;
  float* Pt = dOs + Rows<D>::FLOATS;  // Pt[key][query]
  float* dSt = Pt + TILE * LDS;       // dSt[key][query]
  const int a = grid_a(), b = grid_b();
  const int tiles = (N + TILE - 1) / TILE, kt = blockIdx.x, k0 = kt * TILE;
  const size_t base = (size_t)blockIdx.y * N, head = base * D;

  load_rows<D>(Ks, k + head, k0, N);
  load_rows<D>(Vs, v + head, k0, N);
  float4 gk[PER][H], gv[PER][H];  // rows: keys k0 + a + 16r
#pragma unroll
  for (int r = 0; r < PER; ++r)
#pragma unroll
    for (int h = 0; h < H; ++h) gk[r][h] = gv[r][h] = make_float4(0.f, 0.f, 0.f, 0.f);

  const int qt_begin = causal ? kt : 0;
  for (int qt = qt_begin; qt < tiles; ++qt) {
    const int q0 = qt * TILE;
    if (qt > qt_begin) __syncthreads();  // the last step's products are done with Qs, dOs, Pt, dSt
    load_rows<D>(Qs, q + head, q0, N);
    load_rows<D>(dOs, dout + head, q0, N);
    float lse2[PER], dl[PER];
    row_stats(lse2, dl, lse, delta, base, q0, N, a);
    __syncthreads();

    float p[PER][PER], ds[PER][PER];
    probs_and_grads<D>(p, ds, Qs, Ks, dOs, Vs, lse2, dl, scale2, causal, q0, k0, N, a, b);
#pragma unroll
    for (int r = 0; r < PER; ++r)
#pragma unroll
      for (int c = 0; c < PER; ++c) {
        Pt[(b + GRID * c) * LDS + a + GRID * r] = p[r][c];
        dSt[(b + GRID * c) * LDS + a + GRID * r] = ds[r][c];
      }
    __syncthreads();
    acc_rows<D>(gv, Pt, dOs, a, b);
    acc_rows<D>(gk, dSt, Qs, a, b);
  }

#pragma unroll
  for (int r = 0; r < PER; ++r) {
    const int j = k0 + a + GRID * r;
    if (j >= N) continue;
    float4* dst_k = reinterpret_cast<float4*>(dk + head + (size_t)j * D) + b;
    float4* dst_v = reinterpret_cast<float4*>(dv + head + (size_t)j * D) + b;
#pragma unroll
    for (int h = 0; h < H; ++h) {
      const float4 g = gk[r][h];
      dst_k[h * GRID] = make_float4(g.x * scale, g.y * scale, g.z * scale, g.w * scale);
      dst_v[h * GRID] = gv[r][h];
    }
  }
}

// dQ for one query tile. Grid (query tiles, BH), x counting down as in the forward. Q and dO stay in
// shared memory; K and V stream, and dS takes V's place once dP is in registers.
template <int D>
__global__ void __launch_bounds__(THREADS, D == 64 ? 2 : 1)
    flash1_dq(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
              const float* __restrict__ dout, const float* __restrict__ lse, const float* __restrict__ delta,
              float* __restrict__ dq, float scale2, float scale, bool causal, int N) {
  constexpr int H = Rows<D>::CHUNKS;
  extern __shared__ float4 smem4[];
  float* Qs = reinterpret_cast<float*>(smem4);
  float* dOs = Qs + Rows<D>::FLOATS;
  float* Ks = dOs + Rows<D>::FLOATS;
  float* Vs = Ks + Rows<D>::FLOATS;  // V, then dS[query][key]
  const int a = grid_a(), b = grid_b();
  const int tiles = (N + TILE - 1) / TILE, qt = tiles - 1 - blockIdx.x, q0 = qt * TILE;
  const size_t base = (size_t)blockIdx.y * N, head = base * D;

  load_rows<D>(Qs, q + head, q0, N);
  load_rows<D>(dOs, dout + head, q0, N);
  float lse2[PER], dl[PER];
  row_stats(lse2, dl, lse, delta, base, q0, N, a);
  float4 g[PER][H];
#pragma unroll
  for (int r = 0; r < PER; ++r)
#pragma unroll
    for (int h = 0; h < H; ++h) g[r][h] = make_float4(0.f, 0.f, 0.f, 0.f);

  const int kt_end = causal ? qt + 1 : tiles;
  for (int kt = 0; kt < kt_end; ++kt) {
    const int k0 = kt * TILE;
    if (kt > 0) __syncthreads();  // the last step's dS K is done with Ks and dS
    load_rows<D>(Ks, k + head, k0, N);
    load_rows<D>(Vs, v + head, k0, N);
    __syncthreads();

    float p[PER][PER], ds[PER][PER];
    probs_and_grads<D>(p, ds, Qs, Ks, dOs, Vs, lse2, dl, scale2, causal, q0, k0, N, a, b);
    __syncthreads();  // every thread is done reading V before dS overwrites it
#pragma unroll
    for (int r = 0; r < PER; ++r)
#pragma unroll
      for (int c = 0; c < PER; ++c) Vs[(a + GRID * r) * LDS + b + GRID * c] = ds[r][c];
    __syncthreads();
    acc_rows<D>(g, Vs, Ks, a, b);
  }

#pragma unroll
  for (int r = 0; r < PER; ++r) {
    const int i = q0 + a + GRID * r;
    if (i >= N) continue;
    float4* dst = reinterpret_cast<float4*>(dq + head + (size_t)i * D) + b;
#pragma unroll
    for (int h = 0; h < H; ++h)
      dst[h * GRID] = make_float4(g[r][h].x * scale, g[r][h].y * scale, g[r][h].z * scale, g[r][h].w * scale);
  }
}

// Above 48 KB a kernel's dynamic shared memory must be opted into. The carveout asks for all of the
// L1/shared split as shared memory, so that two forward blocks (2 x 99 KB at D = 128) share an SM.
template <typename Kernel>
cudaError_t launch_prep(Kernel kernel, size_t smem) {
  const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (e != cudaSuccess) return e;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
}

// BH rides on gridDim.y; N + 64 must not overflow an int.
bool bad_shape(int BH, int N, int D) {
  return BH <= 0 || BH > 65535 || N <= 0 || N > 0x7fffffff - TILE || (D != 64 && D != 128);
}

template <int D>
constexpr size_t forward_smem() { return 3 * Rows<D>::FLOATS * sizeof(float); }
template <int D>
constexpr size_t dkdv_smem() { return (4 * Rows<D>::FLOATS + 2 * TILE * LDS) * sizeof(float); }
template <int D>
constexpr size_t dq_smem() { return 4 * Rows<D>::FLOATS * sizeof(float); }

template <int D>
cudaError_t forward(const float* q, const float* k, const float* v, float* out, float* lse, float scale, bool causal,
                    int BH, int N, cudaStream_t stream) {
  const size_t smem = forward_smem<D>();
  const cudaError_t e = launch_prep(flash1_fwd<D>, smem);
  if (e != cudaSuccess) return e;
  const dim3 grid((N + TILE - 1) / TILE, BH);
  flash1_fwd<D><<<grid, THREADS, smem, stream>>>(q, k, v, out, lse, scale * LOG2E, causal, N);
  return cudaGetLastError();
}

template <int D>
cudaError_t backward(const float* q, const float* k, const float* v, const float* out, const float* lse,
                     const float* dout, float* dq, float* dk, float* dv, float* delta, float scale, bool causal,
                     int BH, int N, cudaStream_t stream) {
  cudaError_t e = launch_prep(flash1_dkdv<D>, dkdv_smem<D>());
  if (e == cudaSuccess) e = launch_prep(flash1_dq<D>, dq_smem<D>());
  if (e != cudaSuccess) return e;
  const size_t rows = (size_t)BH * N;
  const size_t delta_blocks = (rows * (D / 4) + THREADS - 1) / THREADS;
  flash1_delta<D><<<(unsigned)delta_blocks, THREADS, 0, stream>>>(out, dout, delta, rows);
  const dim3 grid((N + TILE - 1) / TILE, BH);
  flash1_dkdv<D><<<grid, THREADS, dkdv_smem<D>(), stream>>>(q, k, v, dout, lse, delta, dk, dv, scale * LOG2E, scale,
                                                       causal, N);
  flash1_dq<D><<<grid, THREADS, dq_smem<D>(), stream>>>(q, k, v, dout, lse, delta, dq, scale * LOG2E, scale, causal, N);
  return cudaGetLastError();
}

}  // namespace

size_t attention_flash1_smem(int D, bool backward) {
  if (D == 64) return backward ? std::max(dkdv_smem<64>(), dq_smem<64>()) : forward_smem<64>();
  return backward ? std::max(dkdv_smem<128>(), dq_smem<128>()) : forward_smem<128>();
}

cudaError_t attention_flash1_forward(const float* q, const float* k, const float* v, float* out, float* lse,
                                     float scale, bool causal, int BH, int N, int D, cudaStream_t stream) {
  if (bad_shape(BH, N, D)) return cudaErrorInvalidValue;
  return D == 64 ? forward<64>(q, k, v, out, lse, scale, causal, BH, N, stream)
                 : forward<128>(q, k, v, out, lse, scale, causal, BH, N, stream);
}

cudaError_t attention_flash1_backward(const float* q, const float* k, const float* v, const float* out,
                                      const float* lse, const float* dout, float* dq, float* dk, float* dv,
                                      float* delta, float scale, bool causal, int BH, int N, int D,
                                      cudaStream_t stream) {
  if (bad_shape(BH, N, D)) return cudaErrorInvalidValue;
  return D == 64 ? backward<64>(q, k, v, out, lse, dout, dq, dk, dv, delta, scale, causal, BH, N, stream)
                 : backward<128>(q, k, v, out, lse, dout, dq, dk, dv, delta, scale, causal, BH, N, stream);
}
