// CPU stand-in for <cuda_runtime.h>: enough of CUDA for a kernel file to compile as plain C++ and run on
// the emulator in ../runtime. Every CUDA thread is a cooperative fiber; a block's fibers run warp by warp
// in an order the test chooses (emu::schedule), so that a missing barrier changes the result.
//
// A .cu file needs one mechanical rewrite first (../rewrite_launches.py): kernel<<<...>>>(args) becomes
// emu::launch(...) and `extern __shared__ T name[];` a pointer into the block's dynamic shared memory.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>

// Qualifiers. A static `__shared__` array becomes a function-local static: one copy that the (sequential)
// blocks share, which is right as long as a block writes it before reading it (it is not poisoned).
#define __global__
#define __device__
#define __host__
#define __shared__ static
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define __grid_constant__

// Vector types with CUDA's alignment (a misaligned float4 access is a bug the emulator should surface).
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) float2 { float x, y; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct uint3 { unsigned x, y, z; };
struct dim3 {
  unsigned x, y, z;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline float2 make_float2(float x, float y) { return {x, y}; }

typedef int cudaError_t;
enum { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorLaunchFailure = 4, cudaErrorNotSupported = 801 };
typedef void* cudaStream_t;
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize, cudaFuncAttributePreferredSharedMemoryCarveout };
enum { cudaSharedmemCarveoutMaxShared = 100 };

// CUDA's device code has integer min / max overloads in the global namespace.
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }

namespace emu {

// How a block's fibers are interleaved (see runtime/scheduler.cpp).
enum class WarpOrder { Forward, Reverse, Alternate };  // Alternate: forward and reverse rounds in turn
// When a cp.async copy reaches shared memory. A correct kernel gives bit-identical results in every mode.
enum class CpAsyncLanding {
  AtWait,           // at the cp.async.wait_group that covers it (the latest legal moment)
  AtIssue,          // at once (the earliest)
  PoisonUntilWait,  // the destination reads as 0xff bytes (NaN) from the issue until the wait
};
// When a wgmma's product lands in its accumulators (shim/cudabench/hopper.cuh).
enum class WgmmaLanding {
  AtWait,   // at the wgmma.wait_group that covers it, reading its operands then (the latest)
  AtIssue,  // at once (the earliest)
};
// When a TMA box reaches shared memory.
enum class TmaLanding {
  AtPhase,  // poisoned (0xff bytes) from the issue until a wait sees its mbarrier's phase complete (the latest)
  AtIssue,  // at once (the earliest)
};
struct Schedule {
  WarpOrder order = WarpOrder::Forward;
  CpAsyncLanding landing = CpAsyncLanding::AtWait;
  WgmmaLanding wgmma = WgmmaLanding::AtWait;
  TmaLanding tma = TmaLanding::AtPhase;
};
extern Schedule schedule;
// The two schedules a Hopper kernel's check runs and compares bit for bit: warps forward with TMA boxes and
// wgmma products landing as late as they may, and warps in reverse with both landing at their issue.
inline const Schedule hopper_schedules[2] = {
    {WarpOrder::Forward, CpAsyncLanding::AtWait, WgmmaLanding::AtWait, TmaLanding::AtPhase},
    {WarpOrder::Reverse, CpAsyncLanding::AtWait, WgmmaLanding::AtIssue, TmaLanding::AtIssue}};
inline const char* const hopper_schedule_names[2] = {"warps forward, TMA and wgmma land as late as they may",
                                                     "warps in reverse, TMA and wgmma land at their issue"};

// The running launch, as the kernel sees it.
extern unsigned current_thread;  // linear thread index in the block
extern uint3 block_index;
extern dim3 grid_size, block_size;
extern char* dynamic_smem;
extern size_t dynamic_smem_bytes;
extern cudaError_t last_error;   // what cudaGetLastError returns next

[[noreturn]] void fail(const char* fmt, ...);  // an emulator check failed: report and abort
uint3 thread_index();
void block_barrier();
float shfl_xor(float value, int lane_mask, unsigned member_mask);
float shfl_idx(float value, int src_lane, unsigned member_mask);

// The checks a real launch makes; false (with last_error set) if it would be refused.
bool launch_allowed(const void* kernel, dim3 grid, dim3 block, size_t smem);
void set_max_dynamic_smem(const void* kernel, int bytes);
// Runs one block: body() once in each of `threads` fibers.
void run_block(const std::function<void()>& body, uint3 index, unsigned threads, size_t smem);

template <typename Kernel, typename... Args>
void launch(Kernel kernel, dim3 grid, dim3 block, size_t smem, cudaStream_t, Args... args) {
  if (!launch_allowed((const void*)kernel, grid, block, smem)) return;
  grid_size = grid;
  block_size = block;
  const std::function<void()> body = [&]() { kernel(args...); };
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) run_block(body, uint3{x, y, z}, block.x * block.y * block.z, smem);
}

}  // namespace emu

#define threadIdx (emu::thread_index())
#define blockIdx (emu::block_index)
#define gridDim (emu::grid_size)
#define blockDim (emu::block_size)
#define __syncthreads() emu::block_barrier()
#define __shfl_xor_sync(mask, value, lane_mask) emu::shfl_xor((value), (lane_mask), (mask))
#define __shfl_sync(mask, value, src_lane) emu::shfl_idx((value), (src_lane), (mask))

template <typename Kernel>
inline cudaError_t cudaFuncSetAttribute(Kernel kernel, cudaFuncAttribute attr, int value) {
  if (attr == cudaFuncAttributePreferredSharedMemoryCarveout)
    return value >= -1 && value <= 100 ? cudaSuccess : cudaErrorInvalidValue;
  if (value < 0 || value > 227 * 1024) return cudaErrorInvalidValue;  // the sm_90 opt-in limit
  emu::set_max_dynamic_smem((const void*)kernel, value);
  return cudaSuccess;
}
inline cudaError_t cudaGetDevice(int* device) {  // one emulated device
  *device = 0;
  return cudaSuccess;
}
// The emulated device is an H100 (compute capability 9.0): the Hopper kernels run (shim/cudabench/hopper.cuh).
enum cudaDeviceAttr { cudaDevAttrComputeCapabilityMajor = 75, cudaDevAttrComputeCapabilityMinor = 76 };
inline cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int) {
  *value = attr == cudaDevAttrComputeCapabilityMajor ? 9 : 0;
  return cudaSuccess;
}
enum cudaDriverEntryPointQueryResult { cudaDriverEntryPointSuccess = 0, cudaDriverEntryPointSymbolNotFound = 1 };
enum { cudaEnableDefault = 0 };
namespace emu {
void* driver_entry_point(const char* symbol);  // runtime/hopper_ops.cpp: cuTensorMapEncodeTiled
}
inline cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** fn, unsigned, unsigned long long,
                                                    cudaDriverEntryPointQueryResult* found) {
  *fn = emu::driver_entry_point(symbol);
  *found = *fn ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;
}
[[noreturn]] inline void __trap() { emu::fail("__trap() reached"); }

inline cudaError_t cudaGetLastError() {
  const cudaError_t e = emu::last_error;
  emu::last_error = cudaSuccess;
  return e;
}
inline cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t) {
  if (bytes && !p) return cudaErrorInvalidValue;
  memset(p, value, bytes);
  return cudaSuccess;
}

// Fibers switch only inside emulator calls, so a plain read-modify-write is atomic here.
inline float atomicAdd(float* p, float v) {
  if (reinterpret_cast<uintptr_t>(p) % 4) emu::fail("atomicAdd(float*) at misaligned %p", (void*)p);
  const float old = *p;
  *p = old + v;
  return old;
}
inline float2 atomicAdd(float2* p, float2 v) {  // the sm_90 vector atomic
  if (reinterpret_cast<uintptr_t>(p) % 8) emu::fail("atomicAdd(float2*) at misaligned %p", (void*)p);
  const float2 old = *p;
  *p = make_float2(old.x + v.x, old.y + v.y);
  return old;
}
template <typename T>
inline T __ldg(const T* p) { return *p; }
template <typename T>
inline T __ldcs(const T* p) { return *p; }  // a cache hint: the same value

// A warp barrier: an exchange every lane of the warp must reach (as __shfl_xor_sync), full mask only.
#define __syncwarp(...) ((void)emu::shfl_xor(0.0f, 0, 0xffffffffu))

// Device math the kernels call that the C++ library spells differently.
inline void sincospi(double x, double* s, double* c) {
  *s = std::sin(M_PI * x);
  *c = std::cos(M_PI * x);
}
inline void sincospif(float x, float* s, float* c) {
  *s = (float)std::sin(M_PI * (double)x);
  *c = (float)std::cos(M_PI * (double)x);
}
