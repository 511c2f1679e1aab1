#include <cstdint>

#include "cudabench/binding.h"
#include "sincos.h"

// y = sin(x)^2 + cos(x)^2 into the caller's y.
void sincos_fused(const at::Tensor& x, at::Tensor& y) {
  cudabench::check_tensor(x, "x");
  cudabench::check_tensor(y, "y");
  cudabench::check_same_device(x, y, "x", "y");
  TORCH_CHECK(x.numel() == y.numel(), cudabench::message("x and y must have the same number of elements (got ",
                                                         x.numel(), " and ", y.numel(), ")"));
  TORCH_CHECK(reinterpret_cast<std::uintptr_t>(x.data_ptr()) % 16 == 0 &&
                  reinterpret_cast<std::uintptr_t>(y.data_ptr()) % 16 == 0,
              "x and y must be 16-byte aligned (float4 access); a fresh tensor is");
  const c10::cuda::CUDAGuard guard(x.device());
  cudabench::check_launch(
      sincos_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), cudabench::stream_of(x)), "sincos kernel");
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("sincos", &sincos_fused, "y = sin(x)^2 + cos(x)^2 in one pass", py::arg("x"), py::arg("y"));
}
