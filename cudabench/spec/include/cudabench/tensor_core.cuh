// Tensor-core and asynchronous-copy building blocks shared by the mma kernels (timex-mma, attn-flash2):
// mma.sync m16n8k16 with float32 sums, ldmatrix, cp.async. Plain CUDA, no torch headers.
//
// Fragment layouts of m16n8k16 (lane = 4g + t, g = lane / 4, t = lane % 4), two 16-bit values per
// register, the lower k (or column) in the low half:
//   A (16 x 16, row-major): a0 (row g, k 2t..2t+1), a1 (row g+8), a2 (row g, k 2t+8..), a3 (row g+8, k 2t+8..)
//   B (16 x 8, k down):     b0 (k 2t..2t+1, column g), b1 (k 2t+8..2t+9, column g)
//   C (16 x 8, float):      c0, c1 (row g, columns 2t, 2t+1), c2, c3 (row g+8, same columns)
// So a C tile pair (columns 0..7 and 8..15) packed to 16 bits is an A fragment: the FlashAttention trick
// that feeds softmax(S) to the next product without leaving registers.
#pragma once
#include <cstdint>
#include <cstring>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

// Tensor-core instructions exist from sm_80; an older GPU never launches these kernels (the bindings
// refuse it), but the families' other kernels must still build for it.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define CUDABENCH_MMA_ARCH 1
#endif

namespace tensor_core {

template <typename S>
__device__ __forceinline__ uint32_t pack2(S lo, S hi) {
  S v[2] = {lo, hi};
  uint32_t r;
  memcpy(&r, v, sizeof r);
  return r;
}

// Explicit conversions: torch's build defines __CUDA_NO_HALF_CONVERSIONS__ and
// __CUDA_NO_BFLOAT16_CONVERSIONS__, so static_cast between float and S does not compile there.
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
template <typename S>
__device__ __forceinline__ S from_float(float x);
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <>
__device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }

// Two floats rounded to the 16-bit type S, packed lo | hi << 16.
template <typename S>
__device__ __forceinline__ uint32_t pack_floats(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t pack_floats<__nv_bfloat16>(float lo, float hi) {
  return pack2(from_float<__nv_bfloat16>(lo), from_float<__nv_bfloat16>(hi));
}
template <>
__device__ __forceinline__ uint32_t pack_floats<__half>(float lo, float hi) {
  return pack2(from_float<__half>(lo), from_float<__half>(hi));
}

// d += a . b on tensor cores, S the 16-bit input type.
template <typename S>
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);

template <>
__device__ __forceinline__ void mma<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#ifdef CUDABENCH_MMA_ARCH
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap();
#endif
}

template <>
__device__ __forceinline__ void mma<__half>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#ifdef CUDABENCH_MMA_ARCH
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap();
#endif
}

// Four 8x8 b16 matrices from shared memory; lane l gives the address of row l % 8 of matrix l / 8.
// Without TRANS lane l receives (row l/4, columns 2(l%4), +1) of each, with TRANS (rows 2(l%4), +1,
// column l/4): the layouts of mma's A fragment from row-major rows, and of a fragment whose k runs
// down the stored rows.
template <bool TRANS>
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
#ifndef CUDABENCH_MMA_ARCH
  __trap();
#else
  const unsigned at = static_cast<unsigned>(__cvta_generic_to_shared(row));
  if constexpr (TRANS) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(at));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(at));
  }
#endif
}

// 16 bytes global -> shared without passing through registers; zeros when !valid (src is not read).
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool valid) {
#ifdef CUDABENCH_MMA_ARCH
  const unsigned at = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(at), "l"(src), "r"(valid ? 16 : 0));
#else
  __trap();
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#ifdef CUDABENCH_MMA_ARCH
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

// Wait until at most N committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#ifdef CUDABENCH_MMA_ARCH
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

}  // namespace tensor_core
