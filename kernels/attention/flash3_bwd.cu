// attn-flash3's backward: dQ, dK, dV of O = softmax(Q Kᵀ / √D [causal]) V from the forward's log-sum-exp,
// bfloat16 or float16 in and out, float32 sums, on the forward's machinery (flash3.cuh: TMA boxes, mbarriers,
// a loading and two computing warpgroups, wgmma from shared memory and from registers). Built for sm_90a.
//   P = exp(scale·Q Kᵀ − lse) (0 where masked), delta_i = Σ_d dO_id·O_id, dV = Pᵀ dO, dP = dO Vᵀ,
//   dS = P∘(dP − delta), dQ = scale·dS K, dK = scale·dSᵀ Q.
// One pass over the keys (FlashAttention-3's backward): dQ is summed across key blocks in float32 by atomic
// adds, so its last bits vary from run to run.
//   bwd_delta: one warp per row, delta = rowsum(dO∘O) in float32;
//   bwd_dkdv:  one block per 128 keys. The producer's thread 0 loads K and V once and Q / dO tiles of 64
//              query rows into three stages. Each consumer warpgroup owns 64 keys; per tile (the rows' lse
//              and delta staged in shared memory by the warpgroup itself; the two take turns issuing their
//              products on named barriers, ping-pong as in the forward)
//                Sᵀ = K Qᵀ, dPᵀ = V dOᵀ (wgmma from shared memory, every operand K-major),
//                Pᵀ = exp2(Sᵀ·scale·log2 e − lse·log2 e), dSᵀ = Pᵀ∘(dPᵀ − delta) in registers,
//                dV += Pᵀ dO, dK += dSᵀ Q (Pᵀ / dSᵀ rounded to 16 bits as the register-A operand; dO and Q
//                read MN-major from the same swizzled tiles),
//                dS written to shared memory (both warpgroups' 64 keys: the tile's 64 rows × 128 keys, K-major),
//                and a tile later, when the other warpgroup's keys are surely there, dQ_tile = dS K: each
//                warpgroup 64 of D's columns (at D = 64 the first alone), added to dq_accum with float4
//                atomics in the accumulators' own order (a thread's 4 registers at a time, a warp's 32 adds
//                one 512-byte run). A first version summed dQ in the same tile: the wait for the other
//                warpgroup's dS put the two in lockstep, ended the ping-pong, and took the backward from
//                1.95 to 2.29 ms at the goal shape;
//   bwd_dq_store: dq = scale · dq_accum, rounded to 16 bits, in (B·H, N, D) order.
// What it adds over attn-flash2's backward (mma.sync; dQ summed by scalar float atomics): the Hopper
// pipeline, dS staged once in shared memory for a tensor-core dQ, and vector atomics in fragment order.
// The twelfth session's version had a dQ kernel of its own (S and dP recomputed per 128 query rows: 1.4×
// the products, no atomics); docs/benchmarks/h100-hopper.md has both.
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
constexpr int STAGES = 3;               // Q / dO tiles of the dK/dV kernel
constexpr int DS_BUFFERS = 3;           // dS tiles (see bwd_dkdv)
template <int D>
struct SmemKV {
  static constexpr int CH = D / 64;
  uint16_t k[CH][KV_BN * 64];
  uint16_t v[CH][KV_BN * 64];
  uint16_t q[STAGES][CH][KV_BM * 64];
  uint16_t dout[STAGES][CH][KV_BM * 64];
  uint16_t ds[DS_BUFFERS][2][KV_BM * 64];  // [tile % 3][key chunk = consumer]: dS, 64 rows × 64 keys, K-major
  float lse2[2][2][KV_BM];   // [consumer][tile parity]: lse · log2 e of the tile's query rows (0 past N)
  float delta[2][2][KV_BM];  // and their delta
  uint64_t kv_full, full[STAGES], empty[STAGES];
};

// dq_accum: per batch-head, per tile of 64 query rows, per 64 columns of D, one warpgroup's m64n64
// accumulators in register order: float4 i of thread t (its registers 4i..4i+3) at i·128 + t.
constexpr int DQ_TILE = KV_BM * 64;  // floats

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
             uint16_t* __restrict__ dv, float* __restrict__ dq_accum, int N, int causal, float scale,
             float scale_log2) {
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
  const int q_tiles = (N + KV_BM - 1) / KV_BM;
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
  // dQ = dS K a tile late: warpgroup g writes its 64 keys of tile j's dS into buffer j % 3 and arrives at
  // barrier ds_written(g, j); the other one waits there before its product reads them. A barrier per
  // writer and tile parity, each waited on before its writer arrives at the next one of the same parity
  // (issue_dq comes first at the end of a tile): no phase takes two tiles' arrivals. Three buffers: tile
  // j + 3's dS is written after the other warpgroup arrived for tile j + 2, so after it waited for its
  // product of tile j.
  auto ds_written = [](int g, int tile) { return 5 + 2 * (g - 1) + (tile & 1); };  // 5..8
  const int kl = warp * 16 + lane / 4;  // this thread's first key in the chunk (its second: kl + 8)
  const int c = D == 128 ? group - 1 : 0;  // the 64 columns of dQ this warpgroup sums (D = 64: the first alone)
  const bool sums_dq = D == 128 || group == 1;
  float dq[32];
  auto issue_dq = [&](int tile) {
    named_barrier_sync(ds_written(3 - group, tile), 256);
    if (!sums_dq) return;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < KV_BN / 16; ++kk) {
      const uint64_t da = desc_k_major_sw128(&s.ds[tile % DS_BUFFERS][kk / 4][(kk % 4) * 16]);
      const uint64_t db = desc_mn_major_sw128(&s.k[c][kk * 16 * 64], 64 * KV_BN * 2);
      mma_ss<64, F16, 1>(dq, da, db, kk > 0);
    }
    wgmma_commit();
  };
  auto add_dq = [&](int tile) {  // after the wait that covers issue_dq(tile)
    if (!sums_dq) return;
    float4* to = reinterpret_cast<float4*>(dq_accum) +
                 ((size_t(bh) * q_tiles + m_begin + tile) * S::CH + c) * (DQ_TILE / 4);
#pragma unroll
    for (int i = 0; i < 8; ++i) atomicAdd(&to[i * 128 + t128], make_float4(dq[4 * i], dq[4 * i + 1], dq[4 * i + 2], dq[4 * i + 3]));
  };
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

    // dQ of the tile before, whose dS both warpgroups wrote a tile ago (the other one is at most half a
    // tile behind this one: its barrier rarely waits), then this tile's dS into this warpgroup's key chunk
    // (row = query, 64 keys of 128 B, the 16-byte unit u of row r at u ^ (r % 8)) for the next
    if (j > 0) issue_dq(j - 1);
    uint16_t* ds = s.ds[j % DS_BUFFERS][group - 1];
#pragma unroll
    for (int c8 = 0; c8 < KV_BM / 8; ++c8)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int qr = 8 * c8 + 2 * (lane % 4) + e, key = kl + 8 * h;
          ds[(qr / 8) * 512 + (qr % 8) * 64 + (((key / 8) ^ (qr % 8)) * 8) + key % 8] =
              uint16_t(dsa[c8 / 2][(c8 % 2) * 2 + h] >> (16 * e));
        }
    fence_proxy_async_shared();
    named_barrier_arrive(ds_written(group, j), 256);
    wgmma_wait<0>();
    if (j > 0) add_dq(j - 1);
    if (t128 == 0) mbar_arrive(&s.empty[st]);
  }
  issue_dq(tiles - 1);
  wgmma_wait<0>();
  add_dq(tiles - 1);

  if (group == 1) named_barrier_sync(my_turn, 256);  // the turn the second passed after its last tile
  store_rows<D, F16>(dv + size_t(bh) * N * D, acc_dv, ka, N, 1.0f, 1.0f);
  store_rows<D, F16>(dk + size_t(bh) * N * D, acc_dk, ka, N, scale, scale);
#else
  __trap();
#endif
}

// ---- dq = scale · dq_accum, one thread per float4 of dq_accum ----------------------------------------
template <int D, bool F16>
__global__ void __launch_bounds__(256) bwd_dq_store(const float4* __restrict__ dq_accum, uint16_t* __restrict__ dq,
                                                    int N, long long count, float scale) {
  const long long at = (long long)blockIdx.x * 256 + threadIdx.x;
  if (at >= count) return;
  constexpr int CH = D / 64;
  const int t = int(at % 128), i = int((at / 128) % 8);
  const long long tile = at / (DQ_TILE / 4);  // (bh, query tile, column chunk)
  const int c = int(tile % CH);
  const long long q_tiles = (N + KV_BM - 1) / KV_BM, bh = tile / CH / q_tiles;
  const int row = int((tile / CH) % q_tiles) * KV_BM + 16 * (t / 32) + (t % 32) / 4;
  const int col = 64 * c + 8 * i + 2 * (t % 4);
  const float4 x = dq_accum[at];
  uint16_t* to = dq + size_t(bh) * N * D;
  if (row < N) *reinterpret_cast<uint32_t*>(&to[size_t(row) * D + col]) = pack<F16>(x.x * scale, x.y * scale);
  if (row + 8 < N) *reinterpret_cast<uint32_t*>(&to[size_t(row + 8) * D + col]) = pack<F16>(x.z * scale, x.w * scale);
}

size_t dq_accum_floats(int BH, int N, int D) { return size_t(BH) * ((N + KV_BM - 1) / KV_BM) * (D / 64) * DQ_TILE; }

template <int D, bool F16>
cudaError_t launch_all(const void* q, const void* k, const void* v, const void* out, const float* lse,
                       const void* dout, void* dq, void* dk, void* dv, float* delta, float* dq_accum, float scale,
                       int BH, int N, bool causal, cudaStream_t stream) {
  // K, V in boxes of 128 rows, Q, dO of 64
  CUtensorMap q64, do64, k128, v128;
  if (!qkv_map(&q64, q, BH, N, D, KV_BM, F16) || !qkv_map(&do64, dout, BH, N, D, KV_BM, F16) ||
      !qkv_map(&k128, k, BH, N, D, KV_BN, F16) || !qkv_map(&v128, v, BH, N, D, KV_BN, F16))
    return cudaErrorInvalidValue;
  const float scale_log2 = scale * LOG2E;
  const long long rows = (long long)BH * N;
  bwd_delta<D, F16><<<unsigned((rows + 7) / 8), 256, 0, stream>>>(static_cast<const Half<F16>*>(out),
                                                                  static_cast<const Half<F16>*>(dout), delta, rows);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  const size_t accum = dq_accum_floats(BH, N, D);
  err = cudaMemsetAsync(dq_accum, 0, accum * sizeof(float), stream);
  if (err != cudaSuccess) return err;

  constexpr size_t kv_bytes = smem_bytes<SmemKV<D>>();
  err = cudaFuncSetAttribute(bwd_dkdv<D, F16>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kv_bytes));
  if (err != cudaSuccess) return err;
  bwd_dkdv<D, F16><<<dim3((N + KV_BN - 1) / KV_BN, BH), THREADS, kv_bytes, stream>>>(
      q64, k128, v128, do64, lse, delta, static_cast<uint16_t*>(dk), static_cast<uint16_t*>(dv), dq_accum, N, causal,
      scale, scale_log2);
  err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  const long long count = (long long)(accum / 4);
  bwd_dq_store<D, F16><<<unsigned((count + 255) / 256), 256, 0, stream>>>(reinterpret_cast<const float4*>(dq_accum),
                                                                          static_cast<uint16_t*>(dq), N, count, scale);
  return cudaGetLastError();
}

}  // namespace

size_t attention_flash3_backward_smem(int D) {
  return D == 128 ? smem_bytes<SmemKV<128>>() : smem_bytes<SmemKV<64>>();
}

size_t attention_flash3_dq_accum_floats(int BH, int N, int D) { return dq_accum_floats(BH, N, D); }

cudaError_t attention_flash3_backward(const void* q, const void* k, const void* v, const void* out, const float* lse,
                                      const void* dout, void* dq, void* dk, void* dv, float* delta, float* dq_accum,
                                      float scale, bool causal, bool fp16, int BH, int N, int D, cudaStream_t stream) {
  if (attention_flash3_not_here() || attention_flash_unsupported(D) || N <= 0 || BH <= 0 || BH > 65535)
    return cudaErrorNotSupported;
  if (D == 128)
    return fp16 ? launch_all<128, true>(q, k, v, out, lse, dout, dq, dk, dv, delta, dq_accum, scale, BH, N, causal, stream)
                : launch_all<128, false>(q, k, v, out, lse, dout, dq, dk, dv, delta, dq_accum, scale, BH, N, causal, stream);
  return fp16 ? launch_all<64, true>(q, k, v, out, lse, dout, dq, dk, dv, delta, dq_accum, scale, BH, N, causal, stream)
              : launch_all<64, false>(q, k, v, out, lse, dout, dq, dk, dv, delta, dq_accum, scale, BH, N, causal, stream);
}
