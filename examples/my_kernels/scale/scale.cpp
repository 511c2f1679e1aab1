#include "cudabench/binding.h"
#include "scale.h"

// y = alpha * x + beta, written into the caller's y (so the check can hand in a NaN-poisoned output).
void scale(const at::Tensor& x, double alpha, double beta, at::Tensor& y) {
  cudabench::check_tensor(x, "x");
  cudabench::check_tensor(y, "y");
  TORCH_CHECK(x.numel() == y.numel(),
              cudabench::message("x and y must have the same number of elements (got ", x.numel(), " and ",
                                 y.numel(), ")"));
  cudabench::check_same_device(x, y, "x", "y");
  const c10::cuda::CUDAGuard guard(x.device());
  cudabench::check_launch(scale_launch(x.data_ptr<float>(), static_cast<float>(alpha), static_cast<float>(beta),
                                       y.data_ptr<float>(), x.numel(), cudabench::stream_of(x)),
                          "scale kernel");
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("scale", &scale, "y = alpha * x + beta for a float32 CUDA tensor x", py::arg("x"), py::arg("alpha"),
        py::arg("beta"), py::arg("y"));
}
