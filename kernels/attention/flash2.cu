// attn-flash2: attention on tensor cores (FlashAttention-2's split), bfloat16 or float16 in and out,
// float32 sums. Plain CUDA; the fragment layouts are described in cudabench/tensor_core.cuh.
//
// Forward: a block owns 128 query rows (8 warps x 16) and streams 64-key tiles of K and V through
// double-buffered shared memory (cp.async). Per tile a warp computes S = Q Kᵀ for its 16 rows, updates
// the running max and sum (online softmax, base 2), and adds P V; P never leaves registers (a pair of
// S's accumulator tiles, rounded to 16 bits, is the A fragment of P V).
// Backward: a block owns 64 keys (4 warps x 16) and walks the query tiles that see them, recomputing
// Sᵀ = K Qᵀ and Pᵀ from the forward's log-sum-exp, then dPᵀ = V dOᵀ, dSᵀ = Pᵀ (dPᵀ - delta), and
// accumulates dV += Pᵀ dO and dK += dSᵀ Q in registers. dQ = dS K is summed over key blocks with
// float atomics into a float32 scratch, scaled and rounded by a last small kernel.
// Shared tiles are rows of 16-byte chunks whose chunk index is XORed with row % 8, so ldmatrix's 8 rows
// at one column fall in 8 distinct bank groups.
#include <cfloat>
#include <cstdint>
#include <type_traits>

#include "attention.h"
#include "cudabench/tensor_core.cuh"

namespace {

using tensor_core::cp_async_16;
using tensor_core::cp_async_commit;
using tensor_core::cp_async_wait;
using tensor_core::ldmatrix_x4;
using tensor_core::mma;
using tensor_core::pack_floats;

constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;
constexpr int KEYS = 64;          // keys per K/V tile (forward) and per backward block
// forward: m16 tiles of query rows per warp. 1: 8 warps x 16 rows, Q's fragments kept in registers;
// 2: 4 warps x 32 rows, each K/V fragment read from shared memory feeds two tiles (half the shared-memory
// reads per mma, Q re-read per k-step instead). 128 rows per block either way. 2 is the faster on the
// H100 (bf16, B=4 H=16 N=4096 D=128 causal: 1.37 ms against 1.80 ms; `bash .ci/gpu flash2_ab`).
constexpr int FWD_M = 2;
constexpr bool FWD_KEEP_Q = FWD_M == 1;
constexpr int FWD_WARPS = 8 / FWD_M;
constexpr int FWD_ROWS = FWD_WARPS * 16 * FWD_M;
constexpr int BWD_WARPS = 4;      // backward: 4 warps x 16 keys
constexpr int BWD_ROWS = 64;      // query rows per backward step

// Byte offset of 16-byte chunk `chunk` of row `row` in a tile whose rows hold WIDTH 16-bit values.
template <int WIDTH>
__device__ __forceinline__ int swizzled(int row, int chunk) {
  return row * WIDTH * 2 + ((chunk ^ (row & 7)) << 4);
}

// Rows r0 .. r0+ROWS-1 of one head's (N, D) matrix into a swizzled tile, zeros past N (async).
template <typename S, int D, int ROWS, int THREADS>
__device__ __forceinline__ void load_tile(char* tile, const S* head, int r0, int N) {
  constexpr int CHUNKS = D / 8;
  for (int i = threadIdx.x; i < ROWS * CHUNKS; i += THREADS) {
    const int r = i / CHUNKS, c = i % CHUNKS;
    const bool inside = r0 + r < N;
    cp_async_16(tile + swizzled<D>(r, c), head + (size_t)(inside ? r0 + r : 0) * D + c * 8, inside);
  }
}

// 64 floats of a per-row vector (lse or delta) from row r0 on, zeros past N (async, 16 threads).
__device__ __forceinline__ void load_rows(float* dst, const float* src, int r0, int N) {
  const int i = threadIdx.x;
  if (i < BWD_ROWS / 4) {
    // a 16-byte chunk is either wholly inside or read element by element at the ragged end
    const int r = r0 + 4 * i;
    if (r + 4 <= N && (reinterpret_cast<uintptr_t>(src + r) & 15) == 0) {
      cp_async_16(dst + 4 * i, src + r, true);
    } else {
      for (int e = 0; e < 4; ++e) dst[4 * i + e] = r + e < N ? src[r + e] : 0.f;
    }
  }
}

template <typename S, int D>
__global__ void __launch_bounds__(FWD_WARPS * 32)
flash2_forward(const S* __restrict__ q, const S* __restrict__ k, const S* __restrict__ v, S* __restrict__ out,
               float* __restrict__ lse, float scale_log2, bool causal, int N) {
  constexpr int Q_BYTES = FWD_ROWS * D * 2, KV_BYTES = KEYS * D * 2, THREADS = FWD_WARPS * 32, M = FWD_M;
  extern __shared__ __align__(128) char smem[];
  char* qs = smem;
  char* ks = smem + Q_BYTES;        // two buffers
  char* vs = ks + 2 * KV_BYTES;     // two buffers

  // causal: the longest rows first, so the last wave is short
  const int q0 = (causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * FWD_ROWS;
  const size_t head = (size_t)blockIdx.y * N * D;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int mat = lane / 8, r8 = lane % 8;  // the ldmatrix matrix and row this lane addresses
  const int w0 = warp * 16 * M;             // the warp's first row in the block's tile
  const int kv_end = causal ? min(N, q0 + FWD_ROWS) : N;
  const int tiles = (kv_end + KEYS - 1) / KEYS;

  load_tile<S, D, FWD_ROWS, THREADS>(qs, q + head, q0, N);
  load_tile<S, D, KEYS, THREADS>(ks, k + head, 0, N);
  load_tile<S, D, KEYS, THREADS>(vs, v + head, 0, N);
  cp_async_commit();

  // Q's A fragments of m16 tile mt at k-step kc: kept in registers for one tile per warp, re-read from
  // shared memory for two (whose K and V fragments then serve both)
  uint32_t qf[FWD_KEEP_Q ? D / 16 : 1][4];
  auto q_fragment = [&](uint32_t(&a)[4], int mt, int kc) {
    ldmatrix_x4<false>(a, qs + swizzled<D>(w0 + 16 * mt + (mat & 1) * 8 + r8, kc * 2 + (mat >> 1)));
  };
  float o[M][D / 8][4] = {};
  // per m16 tile and row half: running max (base 2) and this thread's share of the sum
  float m[M][2], l[M][2] = {};
  #pragma unroll
  for (int mt = 0; mt < M; ++mt) m[mt][0] = m[mt][1] = -INFINITY;

  for (int j = 0; j < tiles; ++j) {
    if (j + 1 < tiles) {
      load_tile<S, D, KEYS, THREADS>(ks + ((j + 1) & 1) * KV_BYTES, k + head, (j + 1) * KEYS, N);
      load_tile<S, D, KEYS, THREADS>(vs + ((j + 1) & 1) * KV_BYTES, v + head, (j + 1) * KEYS, N);
    }
    cp_async_commit();
    cp_async_wait<1>();  // tile j (and Q) have landed
    __syncthreads();
    if (FWD_KEEP_Q && j == 0) {
      #pragma unroll
      for (int kc = 0; kc < D / 16; ++kc) q_fragment(qf[FWD_KEEP_Q ? kc : 0], 0, kc);
    }
    const char* kt = ks + (j & 1) * KV_BYTES;
    const char* vt = vs + (j & 1) * KV_BYTES;
    const int k0 = j * KEYS;
    if (!causal || k0 <= q0 + w0 + 16 * M - 1) {  // else every key of the tile is masked for this warp
      float s[M][KEYS / 8][4] = {};
      #pragma unroll
      for (int kc = 0; kc < D / 16; ++kc) {
        uint32_t a[M][4];
        #pragma unroll
        for (int mt = 0; mt < M; ++mt) {
          if constexpr (FWD_KEEP_Q) {
            #pragma unroll
            for (int i = 0; i < 4; ++i) a[mt][i] = qf[kc][i];
          } else {
            q_fragment(a[mt], mt, kc);
          }
        }
        #pragma unroll
        for (int np = 0; np < KEYS / 16; ++np) {
          uint32_t b[4];
          ldmatrix_x4<false>(b, kt + swizzled<D>(np * 16 + (mat >> 1) * 8 + r8, kc * 2 + (mat & 1)));
          #pragma unroll
          for (int mt = 0; mt < M; ++mt) {
            mma<S>(s[mt][2 * np], a[mt], b[0], b[1]);
            mma<S>(s[mt][2 * np + 1], a[mt], b[2], b[3]);
          }
        }
      }
      const bool edge = k0 + KEYS > N || (causal && k0 + KEYS - 1 > q0 + w0);
      #pragma unroll
      for (int mt = 0; mt < M; ++mt) {
        const int row0 = q0 + w0 + 16 * mt + g;  // this thread's rows: row0 and row0 + 8
        float top[2] = {m[mt][0], m[mt][1]};
        #pragma unroll
        for (int nt = 0; nt < KEYS / 8; ++nt) {
          #pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int key = k0 + nt * 8 + 2 * t + (e & 1);
            float x = s[mt][nt][e] * scale_log2;
            if (edge && (key >= N || (causal && key > row0 + 8 * (e >> 1)))) x = -INFINITY;
            s[mt][nt][e] = x;
            top[e >> 1] = fmaxf(top[e >> 1], x);
          }
        }
        #pragma unroll
        for (int r = 0; r < 2; ++r) {
          top[r] = fmaxf(top[r], __shfl_xor_sync(0xffffffffu, top[r], 1));
          top[r] = fmaxf(top[r], __shfl_xor_sync(0xffffffffu, top[r], 2));
          const float base = top[r] == -INFINITY ? 0.f : top[r];  // a row with no key yet stays empty
          const float alpha = exp2f(m[mt][r] - base);
          m[mt][r] = top[r];
          l[mt][r] *= alpha;
          #pragma unroll
          for (int nt = 0; nt < D / 8; ++nt) {
            o[mt][nt][2 * r] *= alpha;
            o[mt][nt][2 * r + 1] *= alpha;
          }
          #pragma unroll
          for (int nt = 0; nt < KEYS / 8; ++nt) {
            s[mt][nt][2 * r] = exp2f(s[mt][nt][2 * r] - base);
            s[mt][nt][2 * r + 1] = exp2f(s[mt][nt][2 * r + 1] - base);
            l[mt][r] += s[mt][nt][2 * r] + s[mt][nt][2 * r + 1];
          }
        }
      }
      #pragma unroll
      for (int kc = 0; kc < KEYS / 16; ++kc) {
        uint32_t a[M][4];
        #pragma unroll
        for (int mt = 0; mt < M; ++mt) {
          const float(&lo)[4] = s[mt][2 * kc];
          const float(&hi)[4] = s[mt][2 * kc + 1];
          a[mt][0] = pack_floats<S>(lo[0], lo[1]);
          a[mt][1] = pack_floats<S>(lo[2], lo[3]);
          a[mt][2] = pack_floats<S>(hi[0], hi[1]);
          a[mt][3] = pack_floats<S>(hi[2], hi[3]);
        }
        #pragma unroll
        for (int np = 0; np < D / 16; ++np) {
          uint32_t b[4];
          ldmatrix_x4<true>(b, vt + swizzled<D>(kc * 16 + (mat & 1) * 8 + r8, np * 2 + (mat >> 1)));
          #pragma unroll
          for (int mt = 0; mt < M; ++mt) {
            mma<S>(o[mt][2 * np], a[mt], b[0], b[1]);
            mma<S>(o[mt][2 * np + 1], a[mt], b[2], b[3]);
          }
        }
      }
    }
    __syncthreads();  // everyone is done with buffer j & 1 before tile j + 2 is loaded into it
  }

  #pragma unroll
  for (int mt = 0; mt < M; ++mt) {
    #pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = q0 + w0 + 16 * mt + g + 8 * r;
      float sum = l[mt][r];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      if (row >= N) continue;
      const float inv = 1.f / sum;
      S* dst = out + head + (size_t)row * D + 2 * t;
      #pragma unroll
      for (int nt = 0; nt < D / 8; ++nt)
        *reinterpret_cast<uint32_t*>(dst + nt * 8) =
            pack_floats<S>(o[mt][nt][2 * r] * inv, o[mt][nt][2 * r + 1] * inv);
      if (t == 0) lse[(size_t)blockIdx.y * N + row] = (m[mt][r] + log2f(sum)) * LN2;
    }
  }
}

// delta[r] = sum_c dO[r, c] out[r, c], D / 8 threads per row.
template <typename S, int D>
__global__ void row_dots(const S* __restrict__ dout, const S* __restrict__ out, float* __restrict__ delta,
                         size_t rows) {
  constexpr int PER_ROW = D / 8;
  const size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  const size_t r = i / PER_ROW;
  float sum = 0.f;
  if (r < rows) {
    const uint4 a = *reinterpret_cast<const uint4*>(dout + i * 8);
    const uint4 b = *reinterpret_cast<const uint4*>(out + i * 8);
    const S* x = reinterpret_cast<const S*>(&a);
    const S* y = reinterpret_cast<const S*>(&b);
    for (int e = 0; e < 8; ++e) sum += tensor_core::to_float(x[e]) * tensor_core::to_float(y[e]);
  }
  for (int span = PER_ROW / 2; span > 0; span /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, span);
  if (r < rows && i % PER_ROW == 0) delta[r] = sum;
}

// dq = scale * dq_accum, rounded to S.
template <typename S>
__global__ void scale_round(const float* __restrict__ from, S* __restrict__ to, float scale, size_t count) {
  const size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < count) to[i] = tensor_core::from_float<S>(from[i] * scale);
}

__device__ __forceinline__ void add_pair(float* at, float x, float y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2*>(at), make_float2(x, y));  // one vector atomic on sm_90
#else
  atomicAdd(at, x);
  atomicAdd(at + 1, y);
#endif
}

template <typename S, int D>
__global__ void __launch_bounds__(BWD_WARPS * 32)
flash2_backward(const S* __restrict__ q, const S* __restrict__ k, const S* __restrict__ v, const S* __restrict__ dout,
                const float* __restrict__ lse, const float* __restrict__ delta, float* __restrict__ dq_accum,
                S* __restrict__ dk, S* __restrict__ dv, float scale_log2, float scale, bool causal, int N) {
  constexpr int KV_BYTES = KEYS * D * 2, Q_BYTES = BWD_ROWS * D * 2, THREADS = BWD_WARPS * 32;
  extern __shared__ __align__(128) char smem[];
  char* ks = smem;
  char* vs = ks + KV_BYTES;
  char* qs = vs + KV_BYTES;        // two buffers
  char* dos = qs + 2 * Q_BYTES;    // two buffers
  char* dss = dos + 2 * Q_BYTES;   // dSᵀ, KEYS x BWD_ROWS
  float* lses = reinterpret_cast<float*>(dss + KEYS * BWD_ROWS * 2);  // two buffers
  float* dels = lses + 2 * BWD_ROWS;                                  // two buffers

  const int k0 = blockIdx.x * KEYS;
  const size_t head = (size_t)blockIdx.y * N * D;
  const float* lse_h = lse + (size_t)blockIdx.y * N;
  const float* delta_h = delta + (size_t)blockIdx.y * N;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int mat = lane / 8, r8 = lane % 8;
  const int kw = warp * 16;  // the warp's keys within the block: k0 + kw .. + 15
  const int keys[2] = {k0 + kw + g, k0 + kw + g + 8};
  const int first = causal ? k0 / BWD_ROWS : 0;  // earlier queries see none of these keys
  const int last = (N + BWD_ROWS - 1) / BWD_ROWS;

  auto prefetch = [&](int tile, int buf) {
    load_tile<S, D, BWD_ROWS, THREADS>(qs + buf * Q_BYTES, q + head, tile * BWD_ROWS, N);
    load_tile<S, D, BWD_ROWS, THREADS>(dos + buf * Q_BYTES, dout + head, tile * BWD_ROWS, N);
    load_rows(lses + buf * BWD_ROWS, lse_h, tile * BWD_ROWS, N);
    load_rows(dels + buf * BWD_ROWS, delta_h, tile * BWD_ROWS, N);
  };
  load_tile<S, D, KEYS, THREADS>(ks, k + head, k0, N);
  load_tile<S, D, KEYS, THREADS>(vs, v + head, k0, N);
  prefetch(first, 0);
  cp_async_commit();

  float dka[D / 8][4] = {}, dva[D / 8][4] = {};
  for (int i = first; i < last; ++i) {
    const int buf = (i - first) & 1;
    if (i + 1 < last) prefetch(i + 1, buf ^ 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const char* qt = qs + buf * Q_BYTES;
    const char* dot = dos + buf * Q_BYTES;
    const float* lt = lses + buf * BWD_ROWS;
    const float* dt = dels + buf * BWD_ROWS;
    const int q0 = i * BWD_ROWS;

    // Sᵀ = K Qᵀ and dPᵀ = V dOᵀ for the warp's 16 keys x 64 queries
    float s[BWD_ROWS / 8][4] = {}, dp[BWD_ROWS / 8][4] = {};
    for (int kc = 0; kc < D / 16; ++kc) {
      uint32_t ka[4], va[4];
      ldmatrix_x4<false>(ka, ks + swizzled<D>(kw + (mat & 1) * 8 + r8, kc * 2 + (mat >> 1)));
      ldmatrix_x4<false>(va, vs + swizzled<D>(kw + (mat & 1) * 8 + r8, kc * 2 + (mat >> 1)));
      for (int np = 0; np < BWD_ROWS / 16; ++np) {
        uint32_t b[4];
        const int row = np * 16 + (mat >> 1) * 8 + r8, chunk = kc * 2 + (mat & 1);
        ldmatrix_x4<false>(b, qt + swizzled<D>(row, chunk));
        mma<S>(s[2 * np], ka, b[0], b[1]);
        mma<S>(s[2 * np + 1], ka, b[2], b[3]);
        ldmatrix_x4<false>(b, dot + swizzled<D>(row, chunk));
        mma<S>(dp[2 * np], va, b[0], b[1]);
        mma<S>(dp[2 * np + 1], va, b[2], b[3]);
      }
    }
    // Pᵀ from the log-sum-exp, dSᵀ = Pᵀ (dPᵀ - delta); masked pairs and queries past N give 0
    const bool edge = q0 + BWD_ROWS > N || k0 + KEYS > N || (causal && q0 < k0 + KEYS);
    for (int nt = 0; nt < BWD_ROWS / 8; ++nt) {
      for (int e = 0; e < 4; ++e) {
        const int col = nt * 8 + 2 * t + (e & 1), query = q0 + col;
        float p = exp2f(s[nt][e] * scale_log2 - lt[col] * LOG2E);
        if (edge && (query >= N || keys[e >> 1] >= N || (causal && keys[e >> 1] > query))) p = 0.f;
        s[nt][e] = p;
        dp[nt][e] = p * (dp[nt][e] - dt[col]);
      }
    }
    // dV += Pᵀ dO and dK += dSᵀ Q: k runs over the 64 queries
    for (int kc = 0; kc < BWD_ROWS / 16; ++kc) {
      const uint32_t pa[4] = {pack_floats<S>(s[2 * kc][0], s[2 * kc][1]), pack_floats<S>(s[2 * kc][2], s[2 * kc][3]),
                              pack_floats<S>(s[2 * kc + 1][0], s[2 * kc + 1][1]),
                              pack_floats<S>(s[2 * kc + 1][2], s[2 * kc + 1][3])};
      const uint32_t da[4] = {pack_floats<S>(dp[2 * kc][0], dp[2 * kc][1]),
                              pack_floats<S>(dp[2 * kc][2], dp[2 * kc][3]),
                              pack_floats<S>(dp[2 * kc + 1][0], dp[2 * kc + 1][1]),
                              pack_floats<S>(dp[2 * kc + 1][2], dp[2 * kc + 1][3])};
      for (int np = 0; np < D / 16; ++np) {
        uint32_t b[4];
        const int row = kc * 16 + (mat & 1) * 8 + r8, chunk = np * 2 + (mat >> 1);
        ldmatrix_x4<true>(b, dot + swizzled<D>(row, chunk));
        mma<S>(dva[2 * np], pa, b[0], b[1]);
        mma<S>(dva[2 * np + 1], pa, b[2], b[3]);
        ldmatrix_x4<true>(b, qt + swizzled<D>(row, chunk));
        mma<S>(dka[2 * np], da, b[0], b[1]);
        mma<S>(dka[2 * np + 1], da, b[2], b[3]);
      }
      // dSᵀ rows of this warp into shared memory, for the block's dQ product
      const int col = 2 * t * 2;  // byte offset of columns 2t, 2t+1 within a chunk
      for (int h = 0; h < 2; ++h) {
        const int nt = 2 * kc + h;
        *reinterpret_cast<uint32_t*>(dss + swizzled<BWD_ROWS>(kw + g, nt) + col) = da[2 * h];
        *reinterpret_cast<uint32_t*>(dss + swizzled<BWD_ROWS>(kw + g + 8, nt) + col) = da[2 * h + 1];
      }
    }
    __syncthreads();
    // dQ (64 queries x D) += dS K: warp w takes queries 16w .. 16w+15, half of D at a time
    for (int half = 0; half < 2; ++half) {
      float acc[D / 16][4] = {};
      for (int kc = 0; kc < KEYS / 16; ++kc) {
        uint32_t a[4], b[4];
        ldmatrix_x4<true>(a, dss + swizzled<BWD_ROWS>(kc * 16 + (mat >> 1) * 8 + r8, 2 * warp + (mat & 1)));
        for (int np = 0; np < D / 32; ++np) {
          const int chunk = half * (D / 16) + np * 2 + (mat >> 1);
          ldmatrix_x4<true>(b, ks + swizzled<D>(kc * 16 + (mat & 1) * 8 + r8, chunk));
          mma<S>(acc[2 * np], a, b[0], b[1]);
          mma<S>(acc[2 * np + 1], a, b[2], b[3]);
        }
      }
      for (int r = 0; r < 2; ++r) {
        const int query = q0 + warp * 16 + g + 8 * r;
        if (query >= N) continue;
        float* row = dq_accum + head + (size_t)query * D + half * (D / 2) + 2 * t;
        for (int nt = 0; nt < D / 16; ++nt) add_pair(row + nt * 8, acc[nt][2 * r], acc[nt][2 * r + 1]);
      }
    }
    // No barrier here: tile i's buffers were last read before the one above (the next prefetch may
    // overwrite them), and the next dSᵀ store waits at the top of the loop for every warp's dQ reads.
  }

  for (int r = 0; r < 2; ++r) {
    if (keys[r] >= N) continue;
    S* kd = dk + head + (size_t)keys[r] * D + 2 * t;
    S* vd = dv + head + (size_t)keys[r] * D + 2 * t;
    for (int nt = 0; nt < D / 8; ++nt) {
      *reinterpret_cast<uint32_t*>(kd + nt * 8) = pack_floats<S>(dka[nt][2 * r] * scale, dka[nt][2 * r + 1] * scale);
      *reinterpret_cast<uint32_t*>(vd + nt * 8) = pack_floats<S>(dva[nt][2 * r], dva[nt][2 * r + 1]);
    }
  }
}

constexpr size_t forward_smem(int D) { return (size_t)(FWD_ROWS + 4 * KEYS) * D * 2; }
constexpr size_t backward_smem(int D) {
  return (size_t)(2 * KEYS + 4 * BWD_ROWS) * D * 2 + KEYS * BWD_ROWS * 2 + 4 * BWD_ROWS * sizeof(float);
}

// f(S*, D) for the storage type and head dimension: the template instantiations.
template <typename F>
cudaError_t dispatch(bool fp16, int D, F&& f) {
  if (D != 64 && D != 128) return cudaErrorInvalidValue;
  if (fp16) return D == 64 ? f(static_cast<__half*>(nullptr), std::integral_constant<int, 64>{})
                           : f(static_cast<__half*>(nullptr), std::integral_constant<int, 128>{});
  return D == 64 ? f(static_cast<__nv_bfloat16*>(nullptr), std::integral_constant<int, 64>{})
                 : f(static_cast<__nv_bfloat16*>(nullptr), std::integral_constant<int, 128>{});
}

template <typename K>
cudaError_t allow_smem(K kernel, size_t bytes) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
}

}  // namespace

size_t attention_flash2_smem(int D, bool backward) { return backward ? backward_smem(D) : forward_smem(D); }

cudaError_t attention_flash2_forward(const void* q, const void* k, const void* v, void* out, float* lse,
                                     float scale, bool causal, bool fp16, int BH, int N, int D,
                                     cudaStream_t stream) {
  return dispatch(fp16, D, [&](auto tag, auto dim) {
    using S = std::remove_pointer_t<decltype(tag)>;
    constexpr int DIM = decltype(dim)::value;
    auto kernel = flash2_forward<S, DIM>;
    if (cudaError_t e = allow_smem(kernel, forward_smem(DIM))) return e;
    const dim3 grid((N + FWD_ROWS - 1) / FWD_ROWS, BH);
    kernel<<<grid, FWD_WARPS * 32, forward_smem(DIM), stream>>>(
        static_cast<const S*>(q), static_cast<const S*>(k), static_cast<const S*>(v), static_cast<S*>(out), lse,
        scale * LOG2E, causal, N);
    return cudaGetLastError();
  });
}

cudaError_t attention_flash2_backward(const void* q, const void* k, const void* v, const void* out,
                                      const float* lse, const void* dout, void* dq, void* dk, void* dv,
                                      float* delta, float* dq_accum, float scale, bool causal, bool fp16, int BH,
                                      int N, int D, cudaStream_t stream) {
  return dispatch(fp16, D, [&](auto tag, auto dim) {
    using S = std::remove_pointer_t<decltype(tag)>;
    constexpr int DIM = decltype(dim)::value;
    const size_t rows = (size_t)BH * N, count = rows * DIM;
    if (cudaError_t e = cudaMemsetAsync(dq_accum, 0, count * sizeof(float), stream)) return e;
    constexpr int THREADS = 256;
    row_dots<S, DIM><<<(unsigned)((rows * (DIM / 8) + THREADS - 1) / THREADS), THREADS, 0, stream>>>(
        static_cast<const S*>(dout), static_cast<const S*>(out), delta, rows);
    auto kernel = flash2_backward<S, DIM>;
    if (cudaError_t e = allow_smem(kernel, backward_smem(DIM))) return e;
    const dim3 grid((N + KEYS - 1) / KEYS, BH);
    kernel<<<grid, BWD_WARPS * 32, backward_smem(DIM), stream>>>(
        static_cast<const S*>(q), static_cast<const S*>(k), static_cast<const S*>(v), static_cast<const S*>(dout),
        lse, delta, dq_accum, static_cast<S*>(dk), static_cast<S*>(dv), scale * LOG2E, scale, causal, N);
    scale_round<S><<<(unsigned)((count + THREADS - 1) / THREADS), THREADS, 0, stream>>>(dq_accum, static_cast<S*>(dq),
                                                                                       scale, count);
    return cudaGetLastError();
  });
}
