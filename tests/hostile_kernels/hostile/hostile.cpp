#include "cudabench/binding.h"
#include "hostile.h"

// y = 2 * x + 1, written into the caller's y (so the check can hand in a NaN-poisoned output).
// mode: a HostileMode (hostile.h). Every mode is handed PyTorch's current stream; the side-stream
// mode ignores it on purpose, inside the launcher.
void hostile(const at::Tensor& x, at::Tensor& y, int64_t mode) {
  cudabench::check_tensor(x, "x");
  cudabench::check_tensor(y, "y");
  TORCH_CHECK(x.numel() == y.numel(),
              cudabench::message("x and y must have the same number of elements (got ", x.numel(), " and ",
                                 y.numel(), ")"));
  cudabench::check_same_device(x, y, "x", "y");
  const c10::cuda::CUDAGuard guard(x.device());
  cudabench::check_launch(hostile_launch((int)mode, x.data_ptr<float>(), y.data_ptr<float>(), x.numel(),
                                         cudabench::stream_of(x)),
                          "hostile kernel");
}

void set_graph_calls(int64_t calls) {
  cudabench::check_launch(hostile_set_graph_calls((int)calls), "hostile_set_graph_calls");
}

// y = 2 * x + 1 for every pair (xs[i], ys[i]), in one kernel (hostile-graph-batch).
void batch(const std::vector<at::Tensor>& xs, const std::vector<at::Tensor>& ys) {
  TORCH_CHECK(!xs.empty() && xs.size() == ys.size() && xs.size() <= (size_t)HOSTILE_MAX_BATCH,
              cudabench::message("batch takes 1 to ", HOSTILE_MAX_BATCH, " pairs (got ", xs.size(), " and ", ys.size(), ")"));
  std::vector<const float*> x;
  std::vector<float*> y;
  for (size_t i = 0; i < xs.size(); ++i) {
    cudabench::check_tensor(xs[i], "x");
    cudabench::check_tensor(ys[i], "y");
    TORCH_CHECK(xs[i].numel() == xs[0].numel() && ys[i].numel() == xs[0].numel(), "batch: every x and y of one size");
    x.push_back(xs[i].data_ptr<float>());
    y.push_back(ys[i].data_ptr<float>());
  }
  const c10::cuda::CUDAGuard guard(xs[0].device());
  cudabench::check_launch(hostile_batch(x.data(), y.data(), (int)x.size(), xs[0].numel(), cudabench::stream_of(xs[0])),
                          "hostile batch kernel");
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("hostile", &hostile, "y = 2 * x + 1 for a float32 CUDA tensor x, misbehaving as `mode` says",
        py::arg("x"), py::arg("y"), py::arg("mode") = 0);
  m.def("batch", &batch, "y = 2 * x + 1 for every pair of xs and ys, in one kernel", py::arg("xs"), py::arg("ys"));
  m.def("set_graph_calls", &set_graph_calls, "how many hostile-graph-counter calls the graph being captured holds",
        py::arg("calls"));
}
