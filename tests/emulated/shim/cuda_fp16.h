// CPU stand-in for <cuda_fp16.h>: IEEE binary16 as 16 bits of storage. float -> half rounds to nearest
// even, with subnormals, overflow to infinity and NaN kept; half -> float is exact. The self-test compares
// the rounding with the compiler's own _Float16 where it has one.
#pragma once
#include <cstdint>

#include "float_bits.h"

struct __half {
  uint16_t x;  // the raw bits

  __half() = default;
  explicit __half(float f) : x(from_float(f)) {}
  explicit __half(double f) : x(from_float(static_cast<float>(f))) {}
  explicit operator float() const { return to_float(x); }

  static uint16_t from_float(float f) {
    const uint32_t u = emu::bits_of(f);
    const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
    const uint32_t mag = u & 0x7fffffffu;
    if (mag > 0x7f800000u) return sign | 0x7e00u | static_cast<uint16_t>((mag >> 13) & 0x3ffu);  // quiet NaN
    if (mag >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 (the midpoint past the largest half): inf
    if (mag >= 0x38800000u) {                       // a normal half (exponent >= -14)
      const uint32_t rebiased = mag - 0x38000000u;  // exponent bias 127 -> 15, mantissa in place
      return sign | static_cast<uint16_t>((rebiased + 0xfffu + ((rebiased >> 13) & 1u)) >> 13);
    }
    if (mag < 0x33000000u) return sign;  // below 2^-25, or exactly it (a tie to even 0): zero
    // A subnormal half counts units of 2^-24: shift the 24-bit float mantissa into place, round to even.
    const int shift = 126 - static_cast<int>(mag >> 23);
    const uint32_t mant = (mag & 0x7fffffu) | 0x800000u;
    uint32_t units = mant >> shift;
    const uint32_t rest = mant & ((1u << shift) - 1u), half_unit = 1u << (shift - 1);
    if (rest > half_unit || (rest == half_unit && (units & 1u))) ++units;
    return sign | static_cast<uint16_t>(units);
  }
  static float to_float(uint16_t bits) {
    const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
    const uint32_t exponent = (bits >> 10) & 0x1fu, mant = bits & 0x3ffu;
    if (exponent == 0x1f) return emu::float_of(sign | 0x7f800000u | (mant << 13));  // inf or NaN
    if (exponent) return emu::float_of(sign | ((exponent + 112u) << 23) | (mant << 13));  // rebias 15 -> 127
    return emu::float_of(sign | emu::bits_of(static_cast<float>(mant) * 0x1p-24f));  // subnormal or zero
  }
};
static_assert(sizeof(__half) == 2, "half is 16 bits of storage");

inline __half __float2half_rn(float f) { return __half(f); }
inline float __half2float(__half h) { return static_cast<float>(h); }
