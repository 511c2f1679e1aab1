// attn-flash3's backward: dQ, dK, dV of O = softmax(Q Kᵀ / √D [causal]) V from the forward's log-sum-exp,
// bfloat16 or float16 in and out, float32 sums, on the forward's machinery (flash3.cuh: TMA boxes, mbarriers,
// a loading and two computing warpgroups, wgmma from shared memory and from registers). Built for sm_90a.
//   P = exp(scale·Q Kᵀ − lse) (0 where masked), delta_i = Σ_d dO_id·O_id, dV = Pᵀ dO, dP = dO Vᵀ,
//   dS = P∘(dP − delta), dQ = scale·dS K, dK = scale·dSᵀ Q.
// Three kernels, no atomics, deterministic:
//   bwd_delta: one warp per row, delta = rowsum(dO∘O) in float32;
//   bwd_dkdv:  one block per 128 keys. The producer's thread 0 loads K and V once and Q / dO tiles of 64
//              query rows into three stages. Each consumer warpgroup owns 64 keys; per tile (the rows' lse
//              and delta staged in shared memory by the warpgroup itself; the two take turns issuing their
//              products on named barriers, ping-pong as in the forward)
//                Sᵀ = K Qᵀ, dPᵀ = V dOᵀ (wgmma from shared memory, every operand K-major),
//                Pᵀ = exp2(Sᵀ·scale·log2 e − lse·log2 e), dSᵀ = Pᵀ∘(dPᵀ − delta) in registers,
//                dV += Pᵀ dO, dK += dSᵀ Q (Pᵀ / dSᵀ rounded to 16 bits as the register-A operand; dO and Q
//                read MN-major from the same swizzled tiles);
//   bwd_dq:    one block per 128 query rows (the forward's shape), three stages of K / V, per key tile (64 keys at D = 128, 128 at
//              D = 64: what the registers hold) S = Q Kᵀ and dP = dO Vᵀ, dS in registers, dQ += dS K.
// What it adds over attn-flash2's backward (mma.sync; dQ summed over key blocks by float atomics): the
// Hopper pipeline, and a dQ kernel of its own instead of the atomics. That recomputes S and dP (about
// 1.4× the products of a one-pass backward) and makes dQ deterministic.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "attention.h"
#include "cudabench/hopper.cuh"
#include "cudabench/tensor_core.cuh"

namespace {

#include "flash3.cuh"

// Every tile is CH chunks of (rows × 64 columns) as TMA writes them with the 128-byte swizzle: a chunk is
// K-major for a product over D and MN-major for a product over its rows (the next 64 columns one chunk
// further: the leading byte offset).
constexpr int KV_BN = 128, KV_BM = 64;  // dK/dV kernel: keys per block, query rows per tile
constexpr int STAGES = 3;               // Q / dO tiles of the dK/dV kernel, K / V tiles of the dQ kernel
template <int D>
struct SmemKV {
  static constexpr int CH = D / 64;
  uint16_t k[CH][KV_BN * 64];
  uint16_t v[CH][KV_BN * 64];
  uint16_t q[STAGES][CH][KV_BM * 64];
  uint16_t dout[STAGES][CH][KV_BM * 64];
  float lse2[2][2][KV_BM];   // [consumer][tile parity]: lse · log2 e of the tile's query rows (0 past N)
  float delta[2][2][KV_BM];  // and their delta
  uint64_t kv_full, full[STAGES], empty[STAGES];
};

constexpr int Q_BM = 128;  // dQ kernel: query rows per block
template <int D>           // and keys per tile: S and dP of 64 × Q_BN, dQ of 64 × D in each consumer's registers
constexpr int Q_BN = D == 64 ? 128 : 64;
template <int D>
struct SmemQ {
  static constexpr int CH = D / 64;
  uint16_t q[CH][Q_BM * 64];
  uint16_t dout[CH][Q_BM * 64];
  uint16_t k[STAGES][CH][Q_BN<D> * 64];
  uint16_t v[STAGES][CH][Q_BN<D> * 64];
  uint64_t q_full, full[STAGES], empty[STAGES];
};

// ---- delta_i = Σ_d dO_id · O_id, one warp per row ----------------------------------------------------
template <int D, bool F16>
__global__ void __launch_bounds__(256) bwd_delta(const Half<F16>* __restrict__ out, const Half<F16>* __restrict__ dout,
                                                 float* __restrict__ delta, long long rows) {
  const long long row = (long long)blockIdx.x * 8 + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;  // whole warps
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < D / 64; ++i) {
    const size_t at = size_t(row) * D + 64 * i + 2 * lane;
    sum += tensor_core::to_float(out[at]) * tensor_core::to_float(dout[at]) +
           tensor_core::to_float(out[at + 1]) * tensor_core::to_float(dout[at + 1]);
  }
#pragma unroll
  for (int sh = 16; sh >= 1; sh >>= 1) sum += __shfl_xor_sync(0xffffffff, sum, sh);
  if (lane == 0) delta[row] = sum;
}

// ---- dK, dV: one CTA per 128 keys --------------------------------------------------------------------
template <int D, bool F16>
__global__ void __launch_bounds__(THREADS, 1)
    bwd_dkdv(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
             const __grid_constant__ CUtensorMap map_v, const __grid_constant__ CUtensorMap map_do,
             const float* __restrict__ lse, const float* __restrict__ delta, uint16_t* __restrict__ dk,
             uint16_t* __restrict__ dv, int N, int causal, float scale, float scale_log2) {
#if defined(CUDABENCH_HOPPER)
  constexpr int ST = STAGES;
  using S = SmemKV<D>;
  extern __shared__ uint8_t raw[];
  S& s = aligned_smem<S>(raw);
  const int group = threadIdx.x / 128, t128 = threadIdx.x % 128;
  const int n0 = blockIdx.x * KV_BN, bh = blockIdx.y;
  // query tiles: under causal only those with a row >= the CTA's first key
  const int m_begin = causal ? n0 / KV_BM : 0, m_end = (N + KV_BM - 1) / KV_BM;
  const int tiles = m_end - m_begin;

  if (threadIdx.x == 0) {
    mbar_init(&s.kv_full, 1);
    for (int i = 0; i < ST; ++i) {
      mbar_init(&s.full[i], 1);
      mbar_init(&s.empty[i], 2);  // one arrival per consumer warpgroup
    }
    mbar_fence_init();
  }
  __syncthreads();

  if (group == 0) {
    setmaxnreg_dec<24>();
    if (t128 == 0) {
      mbar_arrive_expect_tx(&s.kv_full, 2 * KV_BN * D * 2);
      for (int c = 0; c < S::CH; ++c) {
        tma_load_3d(s.k[c], &map_k, &s.kv_full, 64 * c, n0, bh);
        tma_load_3d(s.v[c], &map_v, &s.kv_full, 64 * c, n0, bh);
      }
      for (int j = 0; j < tiles; ++j) {
        const int st = j % ST, m0 = (m_begin + j) * KV_BM;
        if (j >= ST) mbar_wait(&s.empty[st], ((j / ST) - 1) & 1);
        mbar_arrive_expect_tx(&s.full[st], 2 * KV_BM * D * 2);
        for (int c = 0; c < S::CH; ++c) {
          tma_load_3d(s.q[st][c], &map_q, &s.full[st], 64 * c, m0, bh);
          tma_load_3d(s.dout[st][c], &map_do, &s.full[st], 64 * c, m0, bh);
        }
      }
    }
    return;
  }

  setmaxnreg_inc<240>();
  const int key0 = (group - 1) * 64, warp = t128 / 32, lane = t128 % 32;
  const int ka = n0 + key0 + warp * 16 + lane / 4, kb = ka + 8;  // this thread's two keys (accumulator rows)
  const float* lse_bh = lse + size_t(bh) * N;
  const float* delta_bh = delta + size_t(bh) * N;
  float acc_dv[D / 2], acc_dk[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) acc_dv[i] = acc_dk[i] = 0.0f;
  mbar_wait(&s.kv_full, 0);
  // Ping-pong, as in the forward: a warpgroup issues a tile's Sᵀ and dPᵀ only after the other issued its
  // previous ones, so that one's exponentials and dSᵀ run while the tensor cores work for the other
  // (named barriers 3 and 4; 1 and 2 are the warpgroups' own, for lse and delta).
  const int my_turn = 2 + group, other_turn = 5 - group;
  if (group == 2) named_barrier_arrive(other_turn, 256);  // the first warpgroup goes first

  for (int j = 0; j < tiles; ++j) {
    const int st = j % ST, m0 = (m_begin + j) * KV_BM;
    // The tile's lse and delta, read from global memory once by this warpgroup's first 64 threads into
    // shared memory for all of its threads, behind a named barrier of the warpgroup (a buffer per tile
    // parity: the writes for tile j + 2 come after every thread passed tile j + 1's barrier, so after its
    // reads of tile j). Each thread loading its 32 values itself cost 0.45 ms of 2.3 at the goal shape.
    float* tile_lse2 = s.lse2[group - 1][j & 1];
    float* tile_delta = s.delta[group - 1][j & 1];
    if (t128 < KV_BM) {
      const int qr = m0 + t128;
      tile_lse2[t128] = qr < N ? lse_bh[qr] * LOG2E : 0.0f;
      tile_delta[t128] = qr < N ? delta_bh[qr] : 0.0f;
    }
    named_barrier_sync(group, 128);
    mbar_wait(&s.full[st], (j / ST) & 1);
    float sc[KV_BM / 2], dp[KV_BM / 2];  // Sᵀ and dPᵀ: 64 keys × 64 query rows
    named_barrier_sync(my_turn, 256);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint64_t da = desc_k_major_sw128(&s.k[kk / 4][key0 * 64 + (kk % 4) * 16]);
      const uint64_t db = desc_k_major_sw128(&s.q[st][kk / 4][(kk % 4) * 16]);
      mma_ss<64, F16>(sc, da, db, kk > 0);
    }
    wgmma_commit();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint64_t da = desc_k_major_sw128(&s.v[kk / 4][key0 * 64 + (kk % 4) * 16]);
      const uint64_t db = desc_k_major_sw128(&s.dout[st][kk / 4][(kk % 4) * 16]);
      mma_ss<64, F16>(dp, da, db, kk > 0);
    }
    wgmma_commit();
    named_barrier_arrive(other_turn, 256);
    wgmma_wait<1>();  // Sᵀ has landed

    // Pᵀ in place (float), and packed to bf16 as the A fragments of dV += Pᵀ dO: k16 slice kk is the
    // accumulator pairs of 8-column blocks 2kk and 2kk+1
    uint32_t pa[KV_BM / 16][4];
#pragma unroll
    for (int c8 = 0; c8 < KV_BM / 8; ++c8) {
      const int col = 8 * c8 + 2 * (lane % 4), qr = m0 + col;  // query rows qr, qr + 1
      const float l0 = tile_lse2[col], l1 = tile_lse2[col + 1];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int query = qr + (r & 1), key = r < 2 ? ka : kb;
        const bool dead = query >= N || (causal && key > query);
        float& x = sc[4 * c8 + r];
        x = dead ? 0.0f : exp2_approx(x * scale_log2 - ((r & 1) ? l1 : l0));
      }
      pa[c8 / 2][(c8 % 2) * 2] = pack<F16>(sc[4 * c8], sc[4 * c8 + 1]);
      pa[c8 / 2][(c8 % 2) * 2 + 1] = pack<F16>(sc[4 * c8 + 2], sc[4 * c8 + 3]);
    }
    wgmma_wait<0>();  // dPᵀ has landed
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < KV_BM / 16; ++kk) {
      const uint64_t db = desc_mn_major_sw128(&s.dout[st][0][kk * 16 * 64], 64 * KV_BM * 2);
      mma_rs<D, F16>(acc_dv, pa[kk], db);
    }
    wgmma_commit();

    // dSᵀ = Pᵀ ∘ (dPᵀ − delta), packed likewise for dK += dSᵀ Q
    uint32_t dsa[KV_BM / 16][4];
#pragma unroll
    for (int c8 = 0; c8 < KV_BM / 8; ++c8) {
      const int col = 8 * c8 + 2 * (lane % 4);
      const float d0 = tile_delta[col], d1 = tile_delta[col + 1];
      const float x0 = sc[4 * c8] * (dp[4 * c8] - d0), x1 = sc[4 * c8 + 1] * (dp[4 * c8 + 1] - d1);
      const float x2 = sc[4 * c8 + 2] * (dp[4 * c8 + 2] - d0), x3 = sc[4 * c8 + 3] * (dp[4 * c8 + 3] - d1);
      dsa[c8 / 2][(c8 % 2) * 2] = pack<F16>(x0, x1);
      dsa[c8 / 2][(c8 % 2) * 2 + 1] = pack<F16>(x2, x3);
    }
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < KV_BM / 16; ++kk) {
      const uint64_t db = desc_mn_major_sw128(&s.q[st][0][kk * 16 * 64], 64 * KV_BM * 2);
      mma_rs<D, F16>(acc_dk, dsa[kk], db);
    }
    wgmma_commit();
    wgmma_wait<0>();
    if (t128 == 0) mbar_arrive(&s.empty[st]);
  }

  if (group == 1) named_barrier_sync(my_turn, 256);  // the turn the second passed after its last tile
  store_rows<D, F16>(dv + size_t(bh) * N * D, acc_dv, ka, N, 1.0f, 1.0f);
  store_rows<D, F16>(dk + size_t(bh) * N * D, acc_dk, ka, N, scale, scale);
#else
  __trap();
#endif
}

// ---- dQ: one CTA per 128 query rows -----------------------------------------------------------------
template <int D, bool F16>
__global__ void __launch_bounds__(THREADS, 1)
    bwd_dq(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
           const __grid_constant__ CUtensorMap map_v, const __grid_constant__ CUtensorMap map_do,
           const float* __restrict__ lse, const float* __restrict__ delta, uint16_t* __restrict__ dq, int N,
           int causal, float scale, float scale_log2) {
#if defined(CUDABENCH_HOPPER)
  constexpr int ST = STAGES;
  using S = SmemQ<D>;
  constexpr int BN = Q_BN<D>;
  extern __shared__ uint8_t raw[];
  S& s = aligned_smem<S>(raw);
  const int group = threadIdx.x / 128, t128 = threadIdx.x % 128;
  const int m_tiles = (N + Q_BM - 1) / Q_BM;
  const int m_tile = causal ? m_tiles - 1 - blockIdx.x : blockIdx.x;  // causal: the longest rows first
  const int m0 = m_tile * Q_BM, bh = blockIdx.y;
  const int n_tiles = causal ? min((N + BN - 1) / BN, (m0 + Q_BM + BN - 1) / BN) : (N + BN - 1) / BN;

  if (threadIdx.x == 0) {
    mbar_init(&s.q_full, 1);
    for (int i = 0; i < ST; ++i) {
      mbar_init(&s.full[i], 1);
      mbar_init(&s.empty[i], 2);
    }
    mbar_fence_init();
  }
  __syncthreads();

  if (group == 0) {
    setmaxnreg_dec<24>();
    if (t128 == 0) {
      mbar_arrive_expect_tx(&s.q_full, 2 * Q_BM * D * 2);
      for (int c = 0; c < S::CH; ++c) {
        tma_load_3d(s.q[c], &map_q, &s.q_full, 64 * c, m0, bh);
        tma_load_3d(s.dout[c], &map_do, &s.q_full, 64 * c, m0, bh);
      }
      stream_kv<ST, S::CH, BN>(s.k, s.v, s.full, s.empty, &map_k, &map_v, n_tiles, bh);
    }
    return;
  }

  setmaxnreg_inc<240>();
  const int row0 = (group - 1) * 64, warp = t128 / 32, lane = t128 % 32;
  const int ra = m0 + row0 + warp * 16 + lane / 4, rb = ra + 8;  // this thread's two query rows
  const float lse_a = ra < N ? lse[size_t(bh) * N + ra] * LOG2E : 0.0f;
  const float lse_b = rb < N ? lse[size_t(bh) * N + rb] * LOG2E : 0.0f;
  const float del_a = ra < N ? delta[size_t(bh) * N + ra] : 0.0f;
  const float del_b = rb < N ? delta[size_t(bh) * N + rb] : 0.0f;
  float acc[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) acc[i] = 0.0f;
  mbar_wait(&s.q_full, 0);

  for (int j = 0; j < n_tiles; ++j) {
    const int st = j % ST;
    mbar_wait(&s.full[st], (j / ST) & 1);
    float sc[BN / 2], dp[BN / 2];  // S and dP: 64 rows × BN keys
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint64_t da = desc_k_major_sw128(&s.q[kk / 4][row0 * 64 + (kk % 4) * 16]);
      const uint64_t db = desc_k_major_sw128(&s.k[st][kk / 4][(kk % 4) * 16]);
      mma_ss<BN, F16>(sc, da, db, kk > 0);
    }
    wgmma_commit();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint64_t da = desc_k_major_sw128(&s.dout[kk / 4][row0 * 64 + (kk % 4) * 16]);
      const uint64_t db = desc_k_major_sw128(&s.v[st][kk / 4][(kk % 4) * 16]);
      mma_ss<BN, F16>(dp, da, db, kk > 0);
    }
    wgmma_commit();
    wgmma_wait<1>();  // S has landed
#pragma unroll
    for (int c8 = 0; c8 < BN / 8; ++c8) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int key = j * BN + 8 * c8 + 2 * (lane % 4) + (r & 1);
        const int row = r < 2 ? ra : rb;
        const bool dead = key >= N || (causal && key > row);
        float& x = sc[4 * c8 + r];
        x = dead ? 0.0f : exp2_approx(x * scale_log2 - (r < 2 ? lse_a : lse_b));
      }
    }
    wgmma_wait<0>();  // dP has landed
    uint32_t dsa[BN / 16][4];
#pragma unroll
    for (int c8 = 0; c8 < BN / 8; ++c8) {
      const float x0 = sc[4 * c8] * (dp[4 * c8] - del_a), x1 = sc[4 * c8 + 1] * (dp[4 * c8 + 1] - del_a);
      const float x2 = sc[4 * c8 + 2] * (dp[4 * c8 + 2] - del_b), x3 = sc[4 * c8 + 3] * (dp[4 * c8 + 3] - del_b);
      dsa[c8 / 2][(c8 % 2) * 2] = pack<F16>(x0, x1);
      dsa[c8 / 2][(c8 % 2) * 2 + 1] = pack<F16>(x2, x3);
    }
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      const uint64_t db = desc_mn_major_sw128(&s.k[st][0][kk * 16 * 64], 64 * BN * 2);
      mma_rs<D, F16>(acc, dsa[kk], db);
    }
    wgmma_commit();
    wgmma_wait<0>();
    if (t128 == 0) mbar_arrive(&s.empty[st]);
  }

  store_rows<D, F16>(dq + size_t(bh) * N * D, acc, ra, N, scale, scale);
#else
  __trap();
#endif
}

template <int D, bool F16>
cudaError_t launch_all(const void* q, const void* k, const void* v, const void* out, const float* lse,
                       const void* dout, void* dq, void* dk, void* dv, float* delta, float scale, int BH, int N,
                       bool causal, cudaStream_t stream) {
  // dK/dV kernel: K, V in boxes of 128 rows, Q, dO of 64; dQ kernel: Q, dO of 128, K, V of Q_BN
  CUtensorMap q64, do64, k128, v128, q128, do128, kq, vq;
  if (!qkv_map(&q64, q, BH, N, D, KV_BM, F16) || !qkv_map(&do64, dout, BH, N, D, KV_BM, F16) ||
      !qkv_map(&k128, k, BH, N, D, KV_BN, F16) || !qkv_map(&v128, v, BH, N, D, KV_BN, F16) ||
      !qkv_map(&q128, q, BH, N, D, Q_BM, F16) || !qkv_map(&do128, dout, BH, N, D, Q_BM, F16) ||
      !qkv_map(&kq, k, BH, N, D, Q_BN<D>, F16) || !qkv_map(&vq, v, BH, N, D, Q_BN<D>, F16))
    return cudaErrorInvalidValue;
  const float scale_log2 = scale * LOG2E;
  const long long rows = (long long)BH * N;
  bwd_delta<D, F16><<<unsigned((rows + 7) / 8), 256, 0, stream>>>(static_cast<const Half<F16>*>(out),
                                                                  static_cast<const Half<F16>*>(dout), delta, rows);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;

  constexpr size_t q_bytes = smem_bytes<SmemQ<D>>(), kv_bytes = smem_bytes<SmemKV<D>>();
  err = cudaFuncSetAttribute(bwd_dq<D, F16>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(q_bytes));
  if (err != cudaSuccess) return err;
  bwd_dq<D, F16><<<dim3((N + Q_BM - 1) / Q_BM, BH), THREADS, q_bytes, stream>>>(
      q128, kq, vq, do128, lse, delta, static_cast<uint16_t*>(dq), N, causal, scale, scale_log2);
  err = cudaGetLastError();
  if (err != cudaSuccess) return err;

  err = cudaFuncSetAttribute(bwd_dkdv<D, F16>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kv_bytes));
  if (err != cudaSuccess) return err;
  bwd_dkdv<D, F16><<<dim3((N + KV_BN - 1) / KV_BN, BH), THREADS, kv_bytes, stream>>>(
      q64, k128, v128, do64, lse, delta, static_cast<uint16_t*>(dk), static_cast<uint16_t*>(dv), N, causal, scale,
      scale_log2);
  return cudaGetLastError();
}

}  // namespace

size_t attention_flash3_backward_smem(int D) {
  return D == 128 ? std::max(smem_bytes<SmemKV<128>>(), smem_bytes<SmemQ<128>>())
                  : std::max(smem_bytes<SmemKV<64>>(), smem_bytes<SmemQ<64>>());
}

cudaError_t attention_flash3_backward(const void* q, const void* k, const void* v, const void* out, const float* lse,
                                      const void* dout, void* dq, void* dk, void* dv, float* delta, float scale,
                                      bool causal, bool fp16, int BH, int N, int D, cudaStream_t stream) {
  if (attention_flash3_not_here() || attention_flash_unsupported(D) || N <= 0 || BH <= 0 || BH > 65535)
    return cudaErrorNotSupported;
  if (D == 128)
    return fp16 ? launch_all<128, true>(q, k, v, out, lse, dout, dq, dk, dv, delta, scale, BH, N, causal, stream)
                : launch_all<128, false>(q, k, v, out, lse, dout, dq, dk, dv, delta, scale, BH, N, causal, stream);
  return fp16 ? launch_all<64, true>(q, k, v, out, lse, dout, dq, dk, dv, delta, scale, BH, N, causal, stream)
              : launch_all<64, false>(q, k, v, out, lse, dout, dq, dk, dv, delta, scale, BH, N, causal, stream);
}
