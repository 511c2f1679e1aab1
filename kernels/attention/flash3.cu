// attn-flash3: attention on Hopper's asynchronous tensor cores (FlashAttention-3's structure), bfloat16 or
// float16 in and out, float32 sums, built for sm_90a. Plain CUDA; the building blocks (mbarriers, TMA,
// wgmma descriptors, setmaxnreg) are cudabench/hopper.cuh's.
//
// What it adds over attn-flash2 (mma.sync fed by each warp's own ldmatrix loads from cp.async tiles):
//   - TMA: one thread of a producer warpgroup asks the copy engine for whole 3-D boxes (64 columns × 128
//     rows of one batch-head) of Q, K and V, written in the 128-byte swizzled layout wgmma reads; rows past
//     N arrive as zeros, so there is no edge code in the loads;
//   - mbarriers: "full" counts the bytes of a K/V stage as they land, "empty" counts the two consumer
//     warpgroups that finished with it, so the producer refills a stage the moment it is free;
//   - wgmma: a consumer warpgroup (128 threads, 64 query rows) computes S = Q Kᵀ (64 × 128 keys) from
//     shared memory in one asynchronous instruction per 16 of D, and O += P V with P straight from its
//     registers (the accumulator pairs of S, rounded to 16 bits, are wgmma's register-A fragment) and V
//     read MN-major (the transpose bit) from the same tile TMA wrote;
//   - warp specialisation: the producer runs on 24 registers, the two consumers on 240 (setmaxnreg), so
//     the 64 × D output and 64 × 128 scores of each consumer thread's rows stay in registers.
//   - overlap: each consumer issues S = Q Kⱼᵀ ahead of P V of the tile before and computes the softmax
//     while that product runs (intra-warpgroup), and the two consumers take turns issuing (named barriers:
//     ping-pong), so one's softmax runs under the other's products.
// The backward is flash3_bwd.cu; what both share is flash3.cuh.
//
// Layout: q, k, v, out (B·H, N, D) contiguous, D = 64 or 128; lse (B·H, N) float32, natural log of the
// scaled scores (attention.h). One block per 128 query rows of one batch-head; causal blocks run the
// longest rows first.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <type_traits>

#include "attention.h"
#include "cudabench/hopper.cuh"
#include "cudabench/tensor_core.cuh"

namespace {

#include "flash3.cuh"

// query rows per block, keys per tile, K/V buffers. Three stages, not two: with the consumers taking turns
// the second frees a stage half a step after the first, and with two stages the first then waited for
// its next tile (H100, bf16, B=4 H=16 N=4096 D=128 causal: 635 µs with two, 476 µs with three).
constexpr int BM = 128, BN = 128, STAGES = 3;

template <int D>
struct Smem {
  static constexpr int CH = D / 64;  // 64-column chunks: one 128-byte swizzled row each
  uint16_t q[CH][BM * 64];
  uint16_t k[STAGES][CH][BN * 64];
  uint16_t v[STAGES][CH][BN * 64];
  uint64_t q_full, full[STAGES], empty[STAGES];
};

// The online softmax of a consumer thread's two query rows, a and a + 8, over the key tiles seen so far.
// Register 4i+r of a score tile is row a (r < 2) or a + 8, key 8i + 2·(lane % 4) + (r & 1) of the tile:
// the four threads of a row hold its keys between them.
struct Rows {
  int a;
  float scale_log2;                   // 1/√D · log2 e: scores become base-2 exponents
  float2 max{-INFINITY, -INFINITY};   // running max of the raw scores
  float2 sum{0.0f, 0.0f};             // this thread's share of Σ exp2(s·scale_log2 − max·scale_log2)

  // sc's raw scores become their probabilities under the new max; returns the factor by which the sums
  // so far, and O, shrink
  __device__ __forceinline__ float2 softmax(float* sc) {
    float2 top = max;
#pragma unroll
    for (int i = 0; i < BN / 8; ++i) {
      top.x = fmaxf(top.x, fmaxf(sc[4 * i], sc[4 * i + 1]));
      top.y = fmaxf(top.y, fmaxf(sc[4 * i + 2], sc[4 * i + 3]));
    }
#pragma unroll
    for (int sh = 1; sh <= 2; sh <<= 1) {
      top.x = fmaxf(top.x, __shfl_xor_sync(0xffffffff, top.x, sh));
      top.y = fmaxf(top.y, __shfl_xor_sync(0xffffffff, top.y, sh));
    }
    // a row whose keys so far are all masked keeps max -inf and probabilities exp2(-inf) = 0
    const float2 shift{top.x == -INFINITY ? 0.0f : top.x * scale_log2, top.y == -INFINITY ? 0.0f : top.y * scale_log2};
    const float2 alpha{exp2_approx(max.x * scale_log2 - shift.x), exp2_approx(max.y * scale_log2 - shift.y)};
    max = top;
    float2 add{0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < BN / 8; ++i) {
      sc[4 * i] = exp2_approx(fmaf(sc[4 * i], scale_log2, -shift.x));
      sc[4 * i + 1] = exp2_approx(fmaf(sc[4 * i + 1], scale_log2, -shift.x));
      sc[4 * i + 2] = exp2_approx(fmaf(sc[4 * i + 2], scale_log2, -shift.y));
      sc[4 * i + 3] = exp2_approx(fmaf(sc[4 * i + 3], scale_log2, -shift.y));
      add.x += sc[4 * i] + sc[4 * i + 1];
      add.y += sc[4 * i + 2] + sc[4 * i + 3];
    }
    sum = {sum.x * alpha.x + add.x, sum.y * alpha.y + add.y};
    return alpha;
  }

  // After the last tile: the rows' whole sums. Returns 1/sum for O (0 for a row that saw no key).
  __device__ __forceinline__ float2 finish() {
#pragma unroll
    for (int sh = 1; sh <= 2; sh <<= 1) {
      sum.x += __shfl_xor_sync(0xffffffff, sum.x, sh);
      sum.y += __shfl_xor_sync(0xffffffff, sum.y, sh);
    }
    return {sum.x > 0.0f ? 1.0f / sum.x : 0.0f, sum.y > 0.0f ? 1.0f / sum.y : 0.0f};
  }

  // the log-sum-exp of the scaled scores, natural log (after finish)
  __device__ __forceinline__ float2 lse() const {
    constexpr float LN2 = 0.6931471805599453f;
    return {(max.x * scale_log2 + log2f(sum.x)) * LN2, (max.y * scale_log2 + log2f(sum.y)) * LN2};
  }
};

// Keys past N, and under causal keys after the row, become -inf: the tile's first key is key0 (lane's
// offset 2·(lane % 4) included).
__device__ __forceinline__ void mask(float* sc, const Rows& rows, int key0, int N, int causal) {
#pragma unroll
  for (int i = 0; i < BN / 8; ++i)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int key = key0 + 8 * i + (r & 1), row = r < 2 ? rows.a : rows.a + 8;
      if (key >= N || (causal && key > row)) sc[4 * i + r] = -INFINITY;
    }
}

template <int D, bool F16>
__global__ void __launch_bounds__(THREADS, 1)
    flash3_forward(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                   const __grid_constant__ CUtensorMap map_v, uint16_t* __restrict__ out, float* __restrict__ lse,
                   int N, int causal, float scale_log2) {
#if defined(CUDABENCH_HOPPER)
  using S = Smem<D>;
  extern __shared__ uint8_t raw[];
  S& s = aligned_smem<S>(raw);
  const int group = threadIdx.x / 128, t128 = threadIdx.x % 128;
  const int m_tiles = (N + BM - 1) / BM;
  const int m0 = (causal ? m_tiles - 1 - blockIdx.x : blockIdx.x) * BM, bh = blockIdx.y;
  const int n_tiles = causal ? min((N + BN - 1) / BN, (m0 + BM + BN - 1) / BN) : (N + BN - 1) / BN;

  if (threadIdx.x == 0) {
    mbar_init(&s.q_full, 1);
    for (int i = 0; i < STAGES; ++i) {
      mbar_init(&s.full[i], 1);
      mbar_init(&s.empty[i], 2);
    }
    mbar_fence_init();
  }
  __syncthreads();

  if (group == 0) {  // the producer: Q once, then K and V tile by tile into the free stage
    setmaxnreg_dec<24>();
    if (t128 == 0) {
      mbar_arrive_expect_tx(&s.q_full, BM * D * 2);
      for (int c = 0; c < S::CH; ++c) tma_load_3d(s.q[c], &map_q, &s.q_full, 64 * c, m0, bh);
      stream_kv<STAGES, S::CH, BN>(s.k, s.v, s.full, s.empty, &map_k, &map_v, n_tiles, bh);
    }
    return;
  }

  setmaxnreg_inc<240>();
  const int row0 = m0 + (group - 1) * 64, lane = t128 % 32;
  Rows rows{row0 + (t128 / 32) * 16 + lane / 4, scale_log2};  // this thread's query rows: a and a + 8
  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
  float sc[BN / 2];     // scores of the newest key tile, then its probabilities
  uint32_t p[BN / 16][4];  // the probabilities of the tile being multiplied by V, as wgmma's A fragments
  mbar_wait(&s.q_full, 0);

  // S = Q Kⱼᵀ, and behind it O += P V of the tile before: the softmax of S runs while the tensor cores
  // still work on P V, and only then are O rescaled and P replaced (intra-warpgroup overlap). Tiles
  // wholly inside N and the causal triangle skip the mask.
  const int lane_key = 2 * (lane % 4);
  auto scores = [&](int j) {
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      mma_ss<BN, F16>(sc, desc_k_major_sw128(&s.q[kk / 4][(row0 - m0) * 64 + (kk % 4) * 16]),
                    desc_k_major_sw128(&s.k[j % STAGES][kk / 4][(kk % 4) * 16]), kk > 0);
    wgmma_commit();
  };
  auto times_v = [&](int j) {
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk)  // V's 64-column chunks lie BN rows of 128 B apart
      mma_rs<D, F16>(o, p[kk], desc_mn_major_sw128(&s.v[j % STAGES][0][kk * 16 * 64], 64 * BN * 2));
    wgmma_commit();
  };
  auto probabilities = [&](int j) {  // P of tile j into sc; returns O's factor
    if (j * BN + BN > N || (causal && j * BN + BN - 1 > row0)) mask(sc, rows, j * BN + lane_key, N, causal);
    return rows.softmax(sc);
  };
  auto pack_p = [&]() { pack_fragments<BN, F16>(sc, p); };

  // Ping-pong: a warpgroup issues its products only after the other issued its previous ones, so that
  // one's softmax runs while the tensor cores work for the other (named barriers 1 and 2: "your turn").
  const int my_turn = group, other_turn = 3 - group;
  auto wait_turn = [&] { named_barrier_sync(my_turn, 256); };
  auto pass_turn = [&] { named_barrier_arrive(other_turn, 256); };
  auto wait_keys = [&](int j) { mbar_wait(&s.full[j % STAGES], (j / STAGES) & 1); };
  if (group == 2) pass_turn();  // the first warpgroup goes first

  wait_keys(0);
  wait_turn();
  scores(0);
  pass_turn();
  wgmma_wait<0>();
  probabilities(0);  // O is still zero: nothing to rescale
  pack_p();
  for (int j = 1; j < n_tiles; ++j) {
    wait_keys(j);
    wait_turn();
    scores(j);
    times_v(j - 1);
    pass_turn();
    wgmma_wait<1>();  // S has landed; P V may still run
    const float2 alpha = probabilities(j);
    wgmma_wait<0>();  // P V has landed: its stage is free, O and P may change
    if (t128 == 0) mbar_arrive(&s.empty[(j - 1) % STAGES]);
#pragma unroll
    for (int c8 = 0; c8 < D / 8; ++c8) {
      o[4 * c8] *= alpha.x;
      o[4 * c8 + 1] *= alpha.x;
      o[4 * c8 + 2] *= alpha.y;
      o[4 * c8 + 3] *= alpha.y;
    }
    pack_p();
  }
  wait_turn();
  wgmma_fence();
  times_v(n_tiles - 1);
  if (group == 1) pass_turn();  // the second's last turn needs it; the first's was given at the start
  wgmma_wait<0>();
  if (t128 == 0) mbar_arrive(&s.empty[(n_tiles - 1) % STAGES]);

  const float2 inv = rows.finish();
  store_rows<D, F16>(out + size_t(bh) * N * D, o, rows.a, N, inv.x, inv.y);
  const int ra = rows.a, rb = rows.a + 8;
  if (lane % 4 == 0) {
    const float2 row_lse = rows.lse();
    if (ra < N) lse[size_t(bh) * N + ra] = row_lse.x;
    if (rb < N) lse[size_t(bh) * N + rb] = row_lse.y;
  }
#else
  __trap();  // built for another GPU: the launcher refuses before this runs
#endif
}

template <int D, bool F16>
cudaError_t launch(const CUtensorMap& mq, const CUtensorMap& mk, const CUtensorMap& mv, void* out, float* lse,
                   int BH, int N, bool causal, float scale, cudaStream_t stream) {
  auto kernel = flash3_forward<D, F16>;
  const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes<Smem<D>>());
  if (err != cudaSuccess) return err;
  kernel<<<dim3((N + BM - 1) / BM, BH), THREADS, smem_bytes<Smem<D>>(), stream>>>(
      mq, mk, mv, static_cast<uint16_t*>(out), lse, N, causal, scale * LOG2E);
  return cudaGetLastError();
}

}  // namespace

const char* attention_flash3_not_here() { return not_on_hopper(); }

size_t attention_flash3_forward_smem(int D) { return D == 128 ? smem_bytes<Smem<128>>() : smem_bytes<Smem<64>>(); }

cudaError_t attention_flash3_forward(const void* q, const void* k, const void* v, void* out, float* lse, float scale,
                                     bool causal, bool fp16, int BH, int N, int D, cudaStream_t stream) {
  if (attention_flash3_not_here() || attention_flash_unsupported(D) || N <= 0 || BH <= 0 || BH > 65535)
    return cudaErrorNotSupported;
  CUtensorMap mq, mk, mv;
  if (!qkv_map(&mq, q, BH, N, D, BM, fp16) || !qkv_map(&mk, k, BH, N, D, BN, fp16) ||
      !qkv_map(&mv, v, BH, N, D, BN, fp16))
    return cudaErrorInvalidValue;
  if (D == 128)
    return fp16 ? launch<128, true>(mq, mk, mv, out, lse, BH, N, causal, scale, stream)
                : launch<128, false>(mq, mk, mv, out, lse, BH, N, causal, scale, stream);
  return fp16 ? launch<64, true>(mq, mk, mv, out, lse, BH, N, causal, scale, stream)
              : launch<64, false>(mq, mk, mv, out, lse, BH, N, causal, scale, stream);
}
