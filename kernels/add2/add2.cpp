#include "cudabench/binding.h"
#include "add2.h"

// c = a + b, written into the caller's c (so the check can hand in a NaN-poisoned output).
// variant: 0 grid-stride scalar, 1 float4 grid-stride, 2 float4 one tile per block (1 and 2 fall back to
// the scalar kernel when a pointer is not 16-byte aligned).
void add2(const at::Tensor& a, const at::Tensor& b, at::Tensor& c, int64_t variant) {
  cudabench::check_tensor(a, "a");
  cudabench::check_tensor(b, "b");
  cudabench::check_tensor(c, "c");
  TORCH_CHECK(a.numel() == b.numel() && a.numel() == c.numel(),
              cudabench::message("a, b and c must have the same number of elements (got ", a.numel(), ", ",
                             b.numel(), ", ", c.numel(), ")"));
  cudabench::check_same_device(a, b, "a", "b");
  cudabench::check_same_device(a, c, "a", "c");
  const c10::cuda::CUDAGuard guard(a.device());
  cudabench::check_launch(
      add2_launch((int)variant, a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), a.numel(),
                  cudabench::stream_of(a)),
      "add2 kernel");
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("add2", &add2, "c = a + b for float32 CUDA tensors", py::arg("a"), py::arg("b"), py::arg("c"),
        py::arg("variant") = 0);
}
