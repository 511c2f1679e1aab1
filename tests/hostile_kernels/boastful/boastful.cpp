#include "cudabench/binding.h"
#include "boastful.h"

// y = 2 * x + 1, written into the caller's y (so the check can hand in a NaN-poisoned output).
void boastful(const at::Tensor& x, at::Tensor& y) {
  cudabench::check_tensor(x, "x");
  cudabench::check_tensor(y, "y");
  TORCH_CHECK(x.numel() == y.numel(),
              cudabench::message("x and y must have the same number of elements (got ", x.numel(), " and ",
                                 y.numel(), ")"));
  cudabench::check_same_device(x, y, "x", "y");
  const c10::cuda::CUDAGuard guard(x.device());
  cudabench::check_launch(
      boastful_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), cudabench::stream_of(x)),
      "boastful kernel");
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("boastful", &boastful, "y = 2 * x + 1 for a float32 CUDA tensor x", py::arg("x"), py::arg("y"));
}
