// What attn-flash3's forward (flash3.cu) and backward (flash3_bwd.cu) share: the block's warpgroups, the
// tensor maps of q, k, v, out and dout, and wgmma for either 16-bit type. Include after
// cudabench/hopper.cuh and cudabench/tensor_core.cuh, inside the file's unnamed namespace.
#pragma once

using namespace cudabench::hopper;

constexpr int THREADS = 384;  // one producer (loading) and two consumer (computing) warpgroups
constexpr float LOG2E = 1.4426950408889634f;

// 2^x by the special-function unit alone (ex2.approx.ftz: about 2 ulp, results below 2^-126 flushed to
// zero, which no probability of a 16-bit P misses). exp2f adds range handling around the same instruction:
// 10 % of the forward's time on the H100 (bf16, B=4 H=16 N=4096 D=128).
__device__ __forceinline__ float exp2_approx(float x) {
#ifdef CUDABENCH_EMULATED
  return exp2f(x);
#else
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#endif
}

template <bool F16>
using Half = std::conditional_t<F16, __half, __nv_bfloat16>;

template <bool F16>
__device__ __forceinline__ uint32_t pack(float lo, float hi) {  // rounded to the 16-bit type, lo | hi << 16
  return tensor_core::pack_floats<Half<F16>>(lo, hi);
}

// d (64 × N) += 16 columns of A (K-major, shared memory) times 16 rows of B (K-major: TransB 0)
template <int N, bool F16>
__device__ __forceinline__ void mma_ss(float* d, uint64_t da, uint64_t db, int accumulate) {
  if constexpr (N == 128 && F16) wgmma_m64n128k16_f16<0>(d, da, db, accumulate);
  else if constexpr (N == 128) wgmma_m64n128k16_bf16<0>(d, da, db, accumulate);
  else if constexpr (F16) wgmma_m64n64k16_f16<0>(d, da, db, accumulate);
  else wgmma_m64n64k16_bf16<0>(d, da, db, accumulate);
}

// d (64 × N) += A's 16 columns from registers (the m16n8k16 A fragments) times 16 rows of B (MN-major:
// TransB 1), accumulating
template <int N, bool F16>
__device__ __forceinline__ void mma_rs(float* d, const uint32_t* a, uint64_t db) {
  if constexpr (N == 128 && F16) wgmma_m64n128k16_f16_rs<1>(d, a, db, 1);
  else if constexpr (N == 128) wgmma_m64n128k16_bf16_rs<1>(d, a, db, 1);
  else if constexpr (F16) wgmma_m64n64k16_f16_rs<1>(d, a, db, 1);
  else wgmma_m64n64k16_bf16_rs<1>(d, a, db, 1);
}

// A thread's m64nN accumulators (register 4i+r: row a or a + 8 for r >= 2, column 8i + 2·(lane % 4) +
// (r & 1)) rounded and packed as the A fragments of a product over those columns: 16-column slice kk is
// the register pairs of 8-column blocks 2kk and 2kk+1.
template <int N, bool F16>
__device__ __forceinline__ void pack_fragments(const float* acc, uint32_t (*frag)[4]) {
#pragma unroll
  for (int c8 = 0; c8 < N / 8; ++c8) {
    frag[c8 / 2][(c8 % 2) * 2] = pack<F16>(acc[4 * c8], acc[4 * c8 + 1]);
    frag[c8 / 2][(c8 % 2) * 2 + 1] = pack<F16>(acc[4 * c8 + 2], acc[4 * c8 + 3]);
  }
}

// A thread's rows a and a + 8 of a 64 × D accumulator times `scale`, into row-major (N, D) 16-bit `to`,
// rows past N left alone
template <int D, bool F16>
__device__ __forceinline__ void store_rows(uint16_t* to, const float* acc, int a, int N, float scale_a, float scale_b) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int c8 = 0; c8 < D / 8; ++c8) {
    const int col = 8 * c8 + 2 * (lane % 4);
    if (a < N)
      *reinterpret_cast<uint32_t*>(&to[size_t(a) * D + col]) = pack<F16>(acc[4 * c8] * scale_a, acc[4 * c8 + 1] * scale_a);
    if (a + 8 < N)
      *reinterpret_cast<uint32_t*>(&to[size_t(a + 8) * D + col]) =
          pack<F16>(acc[4 * c8 + 2] * scale_b, acc[4 * c8 + 3] * scale_b);
  }
}

// The producer's stream of K and V: key tiles 0 .. n_tiles-1 of BN rows of batch-head bh into STAGES
// buffers (k[stage][chunk], v[stage][chunk]: CH chunks of 64 columns), each refilled once every consumer
// arrival of its `empty` barrier came in; the bytes land on its `full` barrier. One thread calls this.
template <int STAGES, int CH, int BN>
__device__ __forceinline__ void stream_kv(uint16_t (*k)[CH][BN * 64], uint16_t (*v)[CH][BN * 64], uint64_t* full,
                                          uint64_t* empty, const CUtensorMap* map_k, const CUtensorMap* map_v,
                                          int n_tiles, int bh) {
  for (int j = 0; j < n_tiles; ++j) {
    const int st = j % STAGES;
    if (j >= STAGES) mbar_wait(&empty[st], ((j / STAGES) - 1) & 1);
    mbar_arrive_expect_tx(&full[st], 2 * BN * CH * 64 * 2);
    for (int c = 0; c < CH; ++c) {
      tma_load_3d(k[st][c], map_k, &full[st], 64 * c, j * BN, bh);
      tma_load_3d(v[st][c], map_v, &full[st], 64 * c, j * BN, bh);
    }
  }
}

// (B·H, N, D) of 16-bit values in boxes of 64 columns × `rows` rows of one batch-head, zeros past N: a box is
// K-major for a product over D and MN-major for a product over its rows
inline bool qkv_map(CUtensorMap* map, const void* base, int BH, int N, int D, int rows, bool fp16) {
  const cuuint64_t dims[3] = {cuuint64_t(D), cuuint64_t(N), cuuint64_t(BH)};
  const cuuint64_t strides[2] = {cuuint64_t(D) * 2, cuuint64_t(N) * D * 2};
  const cuuint32_t box[3] = {64, cuuint32_t(rows), 1};
  return tensor_map_16bit(map, base, 3, dims, strides, box, fp16);
}

// a kernel's dynamic shared memory: its layout, and room to align it to the 128-byte swizzle's 1024 bytes
template <typename Smem>
constexpr size_t smem_bytes() {
  return sizeof(Smem) + 1024;
}
template <typename Smem>
__device__ __forceinline__ Smem& aligned_smem(uint8_t* raw) {
  return *reinterpret_cast<Smem*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
}
