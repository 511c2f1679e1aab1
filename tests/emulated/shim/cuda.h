// CPU stand-in for <cuda.h>: the driver API's tensor map (CUtensorMap) that TMA kernels take as a
// parameter, encoded by cuTensorMapEncodeTiled (found through cudaGetDriverEntryPointByVersion, as the
// kernels do). Here the map is a plain record of the global tensor and its box; the emulator's TMA
// copies (runtime/hopper_ops.cpp) read it.
#pragma once
#include <cstdint>

typedef uint64_t cuuint64_t;
typedef uint32_t cuuint32_t;
typedef int CUresult;
enum { CUDA_SUCCESS = 0, CUDA_ERROR_INVALID_VALUE = 1 };

enum CUtensorMapDataType { CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 = 9, CU_TENSOR_MAP_DATA_TYPE_FLOAT16 = 6 };
enum CUtensorMapInterleave { CU_TENSOR_MAP_INTERLEAVE_NONE = 0 };
enum CUtensorMapSwizzle { CU_TENSOR_MAP_SWIZZLE_NONE = 0, CU_TENSOR_MAP_SWIZZLE_128B = 3 };
enum CUtensorMapL2promotion { CU_TENSOR_MAP_L2_PROMOTION_NONE = 0, CU_TENSOR_MAP_L2_PROMOTION_L2_256B = 3 };
enum CUtensorMapFloatOOBfill { CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0 };

struct alignas(64) CUtensorMap {
  const char* base;
  unsigned rank, element_bytes;
  cuuint64_t dims[5];     // elements, innermost first
  cuuint64_t strides[5];  // bytes between consecutive indices of each dimension (strides[0] = element_bytes)
  cuuint32_t box[5];      // elements per box, innermost first
  CUtensorMapSwizzle swizzle;
};
