// Host side of the Hopper rungs (matmul-wgmma, attn-flash3), shared by the real build and the CPU
// emulator: whether this GPU runs the sm_90a code, and TMA tensor maps (through the runtime's driver
// entry point, so no -lcuda).
#pragma once
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <stdint.h>

namespace cudabench {
namespace hopper {

// nullptr on a GPU of compute capability 9.0 (where a build for sm_90a runs), else why not
inline const char* not_on_hopper() {
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess)
    return "could not read this GPU's compute capability";
  if (major != 9 || minor != 0) return "needs sm_90a (a Hopper GPU: H100, H200, GH200)";
  return nullptr;
}

inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found;
  if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) !=
          cudaSuccess ||
      found != cudaDriverEntryPointSuccess)
    return nullptr;
  return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
}

// A tensor of 16-bit elements (bfloat16, or float16 when f16), `rank` dimensions innermost first with
// byte strides of the outer ones, read in boxes of `box` elements with the 128-byte swizzle (box[0] must
// be 64: one 128-byte row), zeros where a box reaches past the tensor.
inline bool tensor_map_16bit(CUtensorMap* map, const void* base, int rank, const cuuint64_t* dims,
                             const cuuint64_t* byte_strides, const cuuint32_t* box, bool f16) {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
  const cuuint32_t steps[5] = {1, 1, 1, 1, 1};
  return encode != nullptr && rank <= 5 &&
         encode(map, f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, rank,
                const_cast<void*>(base), dims, byte_strides, box, steps, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace hopper
}  // namespace cudabench
