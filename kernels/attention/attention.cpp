#include <cmath>

#include "attention.h"
#include "cudabench/binding.h"

namespace {

struct Dims {
  int B, H, N, D;
};

Dims check_qkv(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  cudabench::check_tensor(q, "q");
  cudabench::check_tensor(k, "k");
  cudabench::check_tensor(v, "v");
  cudabench::check_same_device(q, k, "q", "k");
  cudabench::check_same_device(q, v, "q", "v");
  TORCH_CHECK(q.dim() == 4, cudabench::message("q must be (B, H, N, D), got ", q.sizes()));
  TORCH_CHECK(k.sizes() == q.sizes() && v.sizes() == q.sizes(),
              cudabench::message("q, k and v must have one shape, got ", q.sizes(), ", ", k.sizes(), ", ", v.sizes()));
  const Dims d{(int)q.size(0), (int)q.size(1), (int)q.size(2), (int)q.size(3)};
  const char* why = attention_unsupported(d.B, d.H, d.N, d.D);
  TORCH_CHECK(why == nullptr, why ? why : "");
  return d;
}

void check_like(const at::Tensor& t, const char* name, at::IntArrayRef sizes, const at::Tensor& q) {
  cudabench::check_tensor(t, name);
  cudabench::check_same_device(t, q, name, "q");
  TORCH_CHECK(t.sizes() == sizes, cudabench::message(name, " must have shape ", sizes, ", got ", t.sizes()));
}

}  // namespace

// attn-naive forward: out = softmax(q k^T / sqrt(D)) v, with P (B, H, N, N) kept for the backward.
void naive_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, at::Tensor& out, at::Tensor& P,
                   bool causal) {
  const Dims d = check_qkv(q, k, v);
  check_like(out, "out", q.sizes(), q);
  check_like(P, "P", {d.B, d.H, d.N, d.N}, q);
  const c10::cuda::CUDAGuard guard(q.device());
  cudabench::check_launch(
      attention_naive_forward(q.data_ptr<float>(), k.data_ptr<float>(), v.data_ptr<float>(), out.data_ptr<float>(),
                              P.data_ptr<float>(), 1.f / std::sqrt((float)d.D), causal, d.B * d.H, d.N, d.D,
                              cudabench::stream_of(q)),
      "attention forward");
}

// attn-naive backward from the saved P; dP (B, H, N, N) and rows (B, H, N) are scratch.
void naive_backward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
                    const at::Tensor& P, const at::Tensor& dout, at::Tensor& dq, at::Tensor& dk, at::Tensor& dv,
                    at::Tensor& dP, at::Tensor& rows) {
  const Dims d = check_qkv(q, k, v);
  check_like(out, "out", q.sizes(), q);
  check_like(dout, "dout", q.sizes(), q);
  check_like(dq, "dq", q.sizes(), q);
  check_like(dk, "dk", q.sizes(), q);
  check_like(dv, "dv", q.sizes(), q);
  check_like(P, "P", {d.B, d.H, d.N, d.N}, q);
  check_like(dP, "dP", {d.B, d.H, d.N, d.N}, q);
  check_like(rows, "rows", {d.B, d.H, d.N}, q);
  const c10::cuda::CUDAGuard guard(q.device());
  cudabench::check_launch(
      attention_naive_backward(q.data_ptr<float>(), k.data_ptr<float>(), v.data_ptr<float>(), out.data_ptr<float>(),
                               P.data_ptr<float>(), dout.data_ptr<float>(), dq.data_ptr<float>(), dk.data_ptr<float>(),
                               dv.data_ptr<float>(), dP.data_ptr<float>(), rows.data_ptr<float>(),
                               1.f / std::sqrt((float)d.D), d.B * d.H, d.N, d.D, cudabench::stream_of(q)),
      "attention backward");
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("naive_forward", &naive_forward, "attn-naive forward into out (P kept)", py::arg("q"), py::arg("k"),
        py::arg("v"), py::arg("out"), py::arg("P"), py::arg("causal"));
  m.def("naive_backward", &naive_backward, "attn-naive backward into dq, dk, dv", py::arg("q"), py::arg("k"),
        py::arg("v"), py::arg("out"), py::arg("P"), py::arg("dout"), py::arg("dq"), py::arg("dk"), py::arg("dv"),
        py::arg("dP"), py::arg("rows"));
}
