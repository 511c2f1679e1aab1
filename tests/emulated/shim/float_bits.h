// A float's 32 bits and back, for the 16-bit types' conversions (memcpy: no aliasing questions).
#pragma once
#include <cstdint>
#include <cstring>

namespace emu {
inline uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
inline float float_of(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
}  // namespace emu
