// Small helpers for the torch side of a kernel family (the .cpp binding).
// Included with #include "cudabench/binding.h"; cudabench adds this folder to the include path.
#pragma once

#include <torch/extension.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include <string>
#include <type_traits>

namespace cudabench {

// Error messages are built with std::to_string, never by streaming numbers into an ostream:
// an extension linked against its own static libstdc++ (a compiler configured that way, as on
// some GPU images) crashes formatting integers through the process's iostream locale.
inline std::string piece(const char* s) { return s; }
inline std::string piece(const std::string& s) { return s; }
inline std::string piece(c10::ScalarType t) { return c10::toString(t); }
inline std::string piece(const c10::Device& d) { return d.str(); }
inline std::string piece(at::IntArrayRef sizes) {
  std::string out = "(";
  for (size_t i = 0; i < sizes.size(); ++i) out += (i ? ", " : "") + std::to_string(sizes[i]);
  return out + ")";
}
template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
inline std::string piece(T v) { return std::to_string(v); }

template <typename... Parts>
std::string message(const Parts&... parts) {
  std::string out;
  ((out += piece(parts)), ...);
  return out;
}

// A CUDA tensor of the given dtype, contiguous: the layout every shipped kernel assumes.
inline void check_tensor(const at::Tensor& t, const char* name, at::ScalarType dtype = at::kFloat) {
  TORCH_CHECK(t.is_cuda(), cudabench::message(name, " must be a CUDA tensor (got ", t.device(), ")"));
  TORCH_CHECK(t.scalar_type() == dtype,
              cudabench::message(name, " must be ", dtype, " (got ", t.scalar_type(), ")"));
  TORCH_CHECK(t.is_contiguous(), cudabench::message(name, " must be contiguous"));
}

inline void check_same_device(const at::Tensor& a, const at::Tensor& b, const char* a_name, const char* b_name) {
  TORCH_CHECK(a.device() == b.device(),
              cudabench::message(a_name, " and ", b_name, " must be on the same device"));
}

// PyTorch's current stream on the tensor's device, so kernels order with the user's other work.
inline cudaStream_t stream_of(const at::Tensor& t) {
  return c10::cuda::getCurrentCUDAStream(t.get_device()).stream();
}

// Refuse a GPU with less opt-in shared memory per block than a kernel asks for (`at` says for what shape,
// `advice` what to change).
inline void check_shared_memory(const at::Tensor& t, const char* who, size_t smem_bytes, const std::string& at,
                                const char* advice) {
  int optin = 0;
  cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, t.get_device());
  TORCH_CHECK(smem_bytes <= (size_t)optin, message(who, " at ", at, " needs ", smem_bytes / 1024, " KiB of shared "
                                                   "memory per block; this GPU allows ", optin / 1024, " KiB", advice));
}

// Refuse a GPU without tensor-core mma.sync on bfloat16/float16 (sm_80 on), or without the shared memory.
inline void check_mma_device(const at::Tensor& t, const char* who, size_t smem_bytes, const std::string& at,
                             const char* advice) {
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, t.get_device());
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, t.get_device());
  TORCH_CHECK(major >= 8, message(who, " needs a GPU of compute capability 8.0 or newer (mma.sync on bfloat16/"
                                       "float16); this one is ", major, ".", minor));
  check_shared_memory(t, who, smem_bytes, at, advice);
}

// Turn a launcher's error code into a Python RuntimeError that names the kernel.
inline void check_launch(cudaError_t err, const char* what) {
  TORCH_CHECK(err == cudaSuccess, cudabench::message(what, " failed: ", cudaGetErrorString(err)));
}

}  // namespace cudabench
