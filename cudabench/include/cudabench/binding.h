// Small helpers for the torch side of a kernel family (the .cpp binding).
// Included with #include "cudabench/binding.h"; cudabench adds this folder to the include path.
#pragma once

#include <torch/extension.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

namespace cudabench {

// A CUDA tensor of the given dtype, contiguous: the layout every shipped kernel assumes.
inline void check_tensor(const at::Tensor& t, const char* name, at::ScalarType dtype = at::kFloat) {
  TORCH_CHECK(t.is_cuda(), name, " must be a CUDA tensor (got ", t.device(), ")");
  TORCH_CHECK(t.scalar_type() == dtype, name, " must be ", dtype, " (got ", t.scalar_type(), ")");
  TORCH_CHECK(t.is_contiguous(), name, " must be contiguous");
}

inline void check_same_device(const at::Tensor& a, const at::Tensor& b, const char* a_name, const char* b_name) {
  TORCH_CHECK(a.device() == b.device(), a_name, " and ", b_name, " must be on the same device");
}

// PyTorch's current stream on the tensor's device, so kernels order with the user's other work.
inline cudaStream_t stream_of(const at::Tensor& t) {
  return c10::cuda::getCurrentCUDAStream(t.get_device()).stream();
}

// Turn a launcher's error code into a Python RuntimeError that names the kernel.
inline void check_launch(cudaError_t err, const char* what) {
  TORCH_CHECK(err == cudaSuccess, what, " failed: ", cudaGetErrorString(err));
}

}  // namespace cudabench
