// Hopper (sm_90a) building blocks shared by the Hopper rungs (matmul-wgmma, attn-flash3): shared-memory
// addresses, mbarriers, TMA tile loads, wgmma descriptors, fences and register budgets (the host side,
// tensor maps and the GPU check, is hopper_host.h). Written from the PTX ISA
// (mbarrier, cp.async.bulk.tensor, wgmma and setmaxnreg sections).
//
// These instructions exist only in code built for sm_90a (an arch-specific target: Family.feature_archs
// makes a family's build for sm_90 one for sm_90a). A kernel that uses them guards its body with
// CUDABENCH_HOPPER, so that the family still builds for other GPUs, whose binding refuses to launch it.
#pragma once
#include <cuda.h>  // CUtensorMap (a type only: the encoder is found through the runtime)
#include <cuda_runtime.h>
#include <stdint.h>

#include "hopper_host.h"

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define CUDABENCH_HOPPER 1
#endif

namespace cudabench {
namespace hopper {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---- mbarriers (one 8-byte word in shared memory) -------------------------------------------------

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(arrivals) : "memory");
}

// after the inits, before any other thread or the copy engine uses the barriers (then a __syncthreads)
__device__ __forceinline__ void mbar_fence_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }

// one arrival that also says how many bytes the copy engine will deliver to this phase
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}

__device__ __forceinline__ bool mbar_try_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}

// until the phase of this parity has completed (phases count from 0: the k-th completion has parity k & 1)
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  const uint32_t addr = smem_u32(bar);
  while (!mbar_try_wait(addr, parity)) {
  }
}

// ---- named barriers (ids 1..15; 0 is __syncthreads'), for some warps of the block ---------------------

// wait until `threads` threads (whole warps, this one's included) have arrived at barrier `id`
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
// arrive at barrier `id` without waiting
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// ---- TMA: one 2-D box from global memory into shared memory, completing on an mbarrier -----------

// c0 is the inner (contiguous) coordinate, c1 the outer; the map is a __grid_constant__ kernel parameter
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(smem_u32(bar))
      : "memory");
}

// the same for a 3-D box (c0 innermost)
__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(
          smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32(bar))
      : "memory");
}

// ---- wgmma ------------------------------------------------------------------------------------------

// A shared-memory matrix descriptor for a K-major tile written by TMA with 128-byte swizzling: rows of
// 64 16-bit elements (128 B), groups of 8 rows 1024 B apart (the stride byte offset). The leading byte
// offset is unused for swizzled K-major layouts. The tile must be 1024-byte aligned (base offset 0);
// the k-th slice of 16 elements starts 32 B further (the swizzle is applied to the address bits).
__device__ __forceinline__ uint64_t desc_k_major_sw128(const void* tile) {
  const uint64_t addr = smem_u32(tile);
  uint64_t desc = (addr & 0x3FFFF) >> 4;  // start address, 16-byte units, bits 0-13
  desc |= uint64_t(16 >> 4) << 16;        // leading dimension byte offset (unused here)
  desc |= uint64_t(1024 >> 4) << 32;      // stride dimension byte offset: 8 rows of 128 B
  desc |= uint64_t(1) << 62;              // swizzle mode: 128 B
  return desc;
}

// The same for an MN-major tile written by TMA with 128-byte swizzling: rows of 64 elements along M or N
// (128 B, one per k), 8 k-rows to a 1024-byte swizzle atom (the stride byte offset), and the next 64
// elements along M or N `chunk_bytes` further (the leading byte offset). The k-th slice of 16 starts
// 16 rows (2048 B) further.
__device__ __forceinline__ uint64_t desc_mn_major_sw128(const void* tile, uint32_t chunk_bytes) {
  const uint64_t addr = smem_u32(tile);
  uint64_t desc = (addr & 0x3FFFF) >> 4;
  desc |= uint64_t((chunk_bytes & 0x3FFFF) >> 4) << 16;
  desc |= uint64_t(1024 >> 4) << 32;
  desc |= uint64_t(1) << 62;
  return desc;
}

// the threads' own accesses to shared memory before a later TMA (the async proxy) writes it
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int Pending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(Pending) : "memory");
}

// a warpgroup's register budget, changed as one (needs __launch_bounds__(threads, 1) on the kernel)
template <int Registers>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(Registers));
}
template <int Registers>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(Registers));
}

#include "wgmma.inc"

}  // namespace hopper
}  // namespace cudabench
