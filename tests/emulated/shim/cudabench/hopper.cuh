// CPU stand-in for cudabench/hopper.cuh (cudabench/spec/include), with the same API on the emulator.
//   mbarriers keep their phase, pending arrivals and transaction bytes in the emulator; a wait polls once
//   per round of warps (a wait that never completes is reported as a deadlock);
//   TMA copies a box of the tensor map into shared memory with the 128-byte swizzle and completes its
//   bytes on the mbarrier; the box lands when a wait sees that phase complete, poisoned (0xff) until then,
//   or at the issue (emu::schedule.tma);
//   a named barrier (bar.sync / bar.arrive) completes when its thread count has arrived; a sync polls once
//   per round of warps until then;
//   wgmma is a warpgroup collective (all 128 threads, same order); its product lands at the issue or at
//   the wait_group that covers it (emu::schedule.wgmma), reading shared memory and the register operands
//   then, so a kernel that changes either before the wait gives different results in the two modes.
// Descriptors are encoded as on the GPU, with shared addresses as offsets into the dynamic shared memory.
#pragma once
#include <cstdint>

#include <cuda.h>
#include <cuda_runtime.h>

#include "cudabench/hopper_host.h"  // the real one (cudabench/spec/include): the tensor maps and the GPU check

#define CUDABENCH_HOPPER 1  // as in a build for sm_90a: the Hopper paths are compiled
#define CUDABENCH_EMULATED 1

namespace emu {
uint32_t shared_offset(const void* p);
void mbar_init(uint64_t* bar, uint32_t arrivals);
void mbar_arrive(uint64_t* bar, uint32_t tx_bytes);
bool mbar_done(uint64_t* bar, uint32_t parity);
void mbar_wait(uint64_t* bar, uint32_t parity);
void tma_load(void* dst, const CUtensorMap* map, uint64_t* bar, const int* coords, int rank);
void wgmma(float* d, int n, uint64_t desc_a, const uint32_t* a_regs, uint64_t desc_b, bool trans_b, bool accumulate,
           bool f16 = false, bool trans_a = false);
void wgmma_commit();
void wgmma_wait(int pending);
long named_barrier_arrive(int id, unsigned count);
void named_barrier_sync(int id, unsigned count);
}  // namespace emu

namespace cudabench {
namespace hopper {

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return emu::shared_offset(p); }

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t arrivals) { emu::mbar_init(bar, arrivals); }
__device__ __forceinline__ void mbar_fence_init() {}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) { emu::mbar_arrive(bar, bytes); }
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) { emu::mbar_arrive(bar, 0); }
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) { emu::mbar_wait(bar, parity); }

__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1) {
  const int coords[2] = {c0, c1};
  emu::tma_load(dst, map, bar, coords, 2);
}
__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1, int c2) {
  const int coords[3] = {c0, c1, c2};
  emu::tma_load(dst, map, bar, coords, 3);
}

// the real header's encodings (start, leading and stride byte offsets in 16-byte units, 128 B swizzle)
__device__ __forceinline__ uint64_t desc_k_major_sw128(const void* tile) {
  return (uint64_t(smem_u32(tile)) & 0x3FFFF) >> 4 | uint64_t(16 >> 4) << 16 | uint64_t(1024 >> 4) << 32 | uint64_t(1) << 62;
}
__device__ __forceinline__ uint64_t desc_mn_major_sw128(const void* tile, uint32_t chunk_bytes) {
  return (uint64_t(smem_u32(tile)) & 0x3FFFF) >> 4 | uint64_t((chunk_bytes & 0x3FFFF) >> 4) << 16 |
         uint64_t(1024 >> 4) << 32 | uint64_t(1) << 62;
}

__device__ __forceinline__ void named_barrier_sync(int id, int threads) { emu::named_barrier_sync(id, threads); }
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) { emu::named_barrier_arrive(id, threads); }

__device__ __forceinline__ void fence_proxy_async() {}  // the emulator has one proxy
__device__ __forceinline__ void wgmma_fence() {}
__device__ __forceinline__ void wgmma_commit() { emu::wgmma_commit(); }
template <int Pending>
__device__ __forceinline__ void wgmma_wait() { emu::wgmma_wait(Pending); }
template <int Registers>
__device__ __forceinline__ void setmaxnreg_inc() {}
template <int Registers>
__device__ __forceinline__ void setmaxnreg_dec() {}

// the generated wgmma.inc's functions: A from shared memory or from registers (four per thread, the
// m16n8k16 A fragment of each warp's 16 rows), bfloat16 or float16 inputs
#define CUDABENCH_EMU_WGMMA(N, T, F16)                                                                   \
  template <int TransB, int TransA = 0>                                                                  \
  __device__ __forceinline__ void wgmma_m64n##N##k16_##T(float* d, uint64_t da, uint64_t db, int acc) {  \
    emu::wgmma(d, N, da, nullptr, db, TransB, acc, F16, TransA);                                         \
  }                                                                                                      \
  template <int TransB>                                                                                  \
  __device__ __forceinline__ void wgmma_m64n##N##k16_##T##_rs(float* d, const uint32_t* a, uint64_t db, int acc) { \
    emu::wgmma(d, N, 0, a, db, TransB, acc, F16);                                                        \
  }
CUDABENCH_EMU_WGMMA(32, bf16, false)
CUDABENCH_EMU_WGMMA(64, bf16, false)
CUDABENCH_EMU_WGMMA(128, bf16, false)
CUDABENCH_EMU_WGMMA(256, bf16, false)
CUDABENCH_EMU_WGMMA(32, f16, true)
CUDABENCH_EMU_WGMMA(64, f16, true)
CUDABENCH_EMU_WGMMA(128, f16, true)
CUDABENCH_EMU_WGMMA(256, f16, true)
#undef CUDABENCH_EMU_WGMMA

}  // namespace hopper
}  // namespace cudabench
