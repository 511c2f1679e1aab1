#include "cudabench/binding.h"
#include "timex.h"

namespace {

struct Dims {
  int B, C, T;
};

Dims check_inputs(const at::Tensor& w, const at::Tensor& k, int64_t version, bool backward) {
  cudabench::check_tensor(w, "w");
  cudabench::check_tensor(k, "k");
  cudabench::check_same_device(w, k, "w", "k");
  TORCH_CHECK(k.dim() == 3, cudabench::message("k must be (B, C, T), got ", k.sizes()));
  TORCH_CHECK(w.dim() == 2, cudabench::message("w must be (C, T), got ", w.sizes()));
  const Dims d{(int)k.size(0), (int)k.size(1), (int)k.size(2)};
  TORCH_CHECK(w.size(0) == d.C && w.size(1) == d.T,
              cudabench::message("w must be (C, T) = (", d.C, ", ", d.T, "), got ", w.sizes()));
  const char* why = timex_unsupported((int)version, d.B, d.C, d.T, backward);
  TORCH_CHECK(why == nullptr, cudabench::message("timex-v", version, " at B=", d.B, ", C=", d.C, ", T=", d.T, ": ",
                                  why ? why : ""));
  return d;
}

void check_output(const at::Tensor& o, const at::Tensor& like, const char* name) {
  cudabench::check_tensor(o, name);
  cudabench::check_same_device(o, like, name, "k");
  TORCH_CHECK(o.sizes() == like.sizes(),
              cudabench::message(name, " must have shape ", like.sizes(), ", got ", o.sizes()));
}

}  // namespace

// out = timex(w, k) + eps, written into the caller's out.
void forward(const at::Tensor& w, const at::Tensor& k, at::Tensor& out, double eps, int64_t version) {
  const Dims d = check_inputs(w, k, version, false);
  check_output(out, k, "out");
  const c10::cuda::CUDAGuard guard(k.device());
  const size_t scratch_floats = timex_forward_scratch((int)version, d.B, d.C, d.T);
  at::Tensor scratch = at::empty({(int64_t)scratch_floats}, k.options());
  cudabench::check_launch(timex_forward((int)version, w.data_ptr<float>(), k.data_ptr<float>(),
                                        out.data_ptr<float>(), (float)eps,
                                        scratch_floats ? scratch.data_ptr<float>() : nullptr, d.B, d.C, d.T,
                                        cudabench::stream_of(k)),
                          "timex forward");
}

// gw (C,T) and gk (B,C,T) from g = dL/dout, written into the caller's tensors.
void backward(const at::Tensor& w, const at::Tensor& k, const at::Tensor& g, at::Tensor& gw,
              at::Tensor& gk, int64_t version) {
  const Dims d = check_inputs(w, k, version, true);
  check_output(g, k, "g");
  check_output(gk, k, "gk");
  check_output(gw, w, "gw");
  const c10::cuda::CUDAGuard guard(k.device());
  const size_t scratch_floats = timex_backward_scratch((int)version, d.B, d.C, d.T);
  at::Tensor scratch = at::empty({(int64_t)scratch_floats}, k.options());
  cudabench::check_launch(
      timex_backward((int)version, w.data_ptr<float>(), k.data_ptr<float>(), g.data_ptr<float>(),
                     gw.data_ptr<float>(), gk.data_ptr<float>(),
                     scratch_floats ? scratch.data_ptr<float>() : nullptr, d.B, d.C, d.T,
                     cudabench::stream_of(k)),
      "timex backward");
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward, "TimeX forward into out", py::arg("w"), py::arg("k"), py::arg("out"),
        py::arg("eps"), py::arg("version"));
  m.def("backward", &backward, "TimeX backward into gw, gk", py::arg("w"), py::arg("k"), py::arg("g"),
        py::arg("gw"), py::arg("gk"), py::arg("version"));
}
