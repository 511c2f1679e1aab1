// CPU stand-in for cudabench/tensor_core.cuh (cudabench/spec/include), with the same API. It comes first
// on the include path, so a kernel file that includes the real header gets this one.
//   ldmatrix_x4 and mma are warp-collective: all 32 lanes of the warp must call them, in the same order
//   (the emulator checks it); they follow the fragment layouts described in the real header.
//   cp_async_16 queues a copy per thread; the copy lands as emu::schedule.landing says, at the latest at
//   the cp_async_wait that covers its commit group.
#pragma once
#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#define CUDABENCH_MMA_ARCH 1  // as on sm_80 and later: the tensor-core paths are compiled

namespace emu {
void ldmatrix_x4(uint32_t (&r)[4], const void* row, bool trans);
void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, bool fp16);
void cp_async_16(void* dst, const void* src, bool valid);
void cp_async_commit();
void cp_async_wait(int pending);
}  // namespace emu

namespace tensor_core {

// lo | hi << 16, lo and hi 16-bit values (here: types that keep their bits in .x).
template <typename S>
__device__ __forceinline__ uint32_t pack2(S lo, S hi) {
  static_assert(sizeof(S) == 2, "pack2 packs two 16-bit values");
  return lo.x | static_cast<uint32_t>(hi.x) << 16;
}

// Explicit conversions, as in the real header (torch's build forbids the implicit ones there).
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
template <typename S>
__device__ __forceinline__ S from_float(float x) {
  static_assert(std::is_same<S, __nv_bfloat16>::value || std::is_same<S, __half>::value, "bf16 or half");
  return S(x);
}

// Two floats rounded to S, packed; S is __nv_bfloat16 or __half, as in the real header.
template <typename S>
__device__ __forceinline__ uint32_t pack_floats(float lo, float hi) {
  static_assert(std::is_same<S, __nv_bfloat16>::value || std::is_same<S, __half>::value, "bf16 or half");
  return pack2(S(lo), S(hi));
}

template <typename S>
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  static_assert(std::is_same<S, __nv_bfloat16>::value || std::is_same<S, __half>::value, "mma: bf16 or half");
  emu::mma_m16n8k16(d, a, b0, b1, std::is_same<S, __half>::value);
}

template <bool TRANS>
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
  emu::ldmatrix_x4(r, row, TRANS);
}

__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool valid) {
  emu::cp_async_16(dst, src, valid);
}
__device__ __forceinline__ void cp_async_commit() { emu::cp_async_commit(); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  static_assert(N >= 0, "cp.async.wait_group takes N >= 0");
  emu::cp_async_wait(N);
}

}  // namespace tensor_core
