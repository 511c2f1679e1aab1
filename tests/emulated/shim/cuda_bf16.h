// CPU stand-in for <cuda_bf16.h>: bfloat16 as 16 bits of storage. float -> bf16 rounds to nearest even
// (NaN stays a quiet NaN with its sign); bf16 -> float is exact (the top half of a float).
#pragma once
#include <cstdint>

#include "float_bits.h"

struct __nv_bfloat16 {
  uint16_t x;  // the raw bits, as CUDA's type exposes them

  __nv_bfloat16() = default;
  explicit __nv_bfloat16(float f) : x(from_float(f)) {}
  explicit __nv_bfloat16(double f) : x(from_float(static_cast<float>(f))) {}
  explicit operator float() const { return to_float(x); }

  static uint16_t from_float(float f) {
    uint32_t u = emu::bits_of(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);  // round half to even on the 16 bits dropped
    return static_cast<uint16_t>(u >> 16);
  }
  static float to_float(uint16_t bits) { return emu::float_of(static_cast<uint32_t>(bits) << 16); }
};
static_assert(sizeof(__nv_bfloat16) == 2, "bf16 is 16 bits of storage");

inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline float __bfloat162float(__nv_bfloat16 h) { return static_cast<float>(h); }

struct alignas(4) __nv_bfloat162 {
  __nv_bfloat16 x, y;
};
inline __nv_bfloat162 __floats2bfloat162_rn(float lo, float hi) { return {__nv_bfloat16(lo), __nv_bfloat16(hi)}; }
