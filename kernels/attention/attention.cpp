#include <cmath>
#include <cstdint>
#include <utility>

#include "attention.h"
#include "cudabench/binding.h"

namespace {

struct Dims {
  int B, H, N, D;
};

Dims check_qkv(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, at::ScalarType dtype = at::kFloat) {
  cudabench::check_tensor(q, "q", dtype);
  cudabench::check_tensor(k, "k", dtype);
  cudabench::check_tensor(v, "v", dtype);
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

void check_like(const at::Tensor& t, const char* name, at::IntArrayRef sizes, const at::Tensor& q,
                at::ScalarType dtype = at::kFloat) {
  cudabench::check_tensor(t, name, dtype);
  cudabench::check_same_device(t, q, name, "q");
  TORCH_CHECK(t.sizes() == sizes, cudabench::message(name, " must have shape ", sizes, ", got ", t.sizes()));
}

// The flash kernels: head dimension 64 or 128, 16-byte aligned rows (vector and asynchronous copies), and
// for attn-flash2 a GPU with tensor-core mma (sm_80+) and the shared memory its blocks ask for.
// attn-flash3: a Hopper GPU.
Dims check_flash(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int version, bool backward) {
  TORCH_CHECK(version >= 1 && version <= 3, cudabench::message("no attn-flash", version, ": the versions are 1, 2 and 3"));
  const at::ScalarType t = q.scalar_type();
  const bool tensor_cores = version >= 2;
  const std::string who = cudabench::message("attn-flash", version);
  if (tensor_cores) {
    TORCH_CHECK(t == at::kBFloat16 || t == at::kHalf,
                cudabench::message(who, " takes bfloat16 or float16 (tensor cores; got ", t, ")"));
  }
  const Dims d = check_qkv(q, k, v, tensor_cores ? t : at::kFloat);
  const char* why = attention_flash_unsupported(d.D);
  TORCH_CHECK(why == nullptr, why ? why : "");
  for (const at::Tensor* x : {&q, &k, &v})
    TORCH_CHECK(reinterpret_cast<uintptr_t>(x->data_ptr()) % 16 == 0, "q, k and v must start 16-byte aligned");
  const std::string at = cudabench::message("D=", d.D, backward ? " (backward)" : " (forward)");
  if (version == 3) {
    const char* here = attention_flash3_not_here();
    TORCH_CHECK(here == nullptr, "attn-flash3 ", here ? here : "");
    cudabench::check_shared_memory(
        q, "attn-flash3", backward ? attention_flash3_backward_smem(d.D) : attention_flash3_forward_smem(d.D), at, "");
  } else if (tensor_cores)
    cudabench::check_mma_device(q, who.c_str(), attention_flash2_smem(d.D, backward), at, "");
  else
    cudabench::check_shared_memory(q, "attn-flash1", attention_flash1_smem(d.D, backward), at, " (use D=64)");
  return d;
}

void check_flash_outputs(const at::Tensor& q, const Dims& d, std::initializer_list<std::pair<const at::Tensor*, const char*>> outs,
                         const at::Tensor& lse) {
  for (const auto& [t, name] : outs) {
    check_like(*t, name, q.sizes(), q, q.scalar_type());
    TORCH_CHECK(reinterpret_cast<uintptr_t>(t->data_ptr()) % 16 == 0, cudabench::message(name, " must start 16-byte aligned"));
  }
  check_like(lse, "lse", {d.B, d.H, d.N}, q);
}

}  // namespace

// attn-flash1 (float32), attn-flash2 or attn-flash3 (bfloat16/float16) forward into out, with each row's
// log-sum-exp in lse (B, H, N) float32 for the backward.
void flash_forward(int version, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, at::Tensor& out,
                   at::Tensor& lse, bool causal) {
  const Dims d = check_flash(q, k, v, version, false);
  check_flash_outputs(q, d, {{&out, "out"}}, lse);
  const c10::cuda::CUDAGuard guard(q.device());
  const float scale = 1.f / std::sqrt((float)d.D);
  const cudaStream_t stream = cudabench::stream_of(q);
  const bool fp16 = q.scalar_type() == at::kHalf;
  const std::string what = cudabench::message("attn-flash", version, " forward");
  if (version == 1)
    cudabench::check_launch(attention_flash1_forward(q.data_ptr<float>(), k.data_ptr<float>(), v.data_ptr<float>(),
                                                     out.data_ptr<float>(), lse.data_ptr<float>(), scale, causal,
                                                     d.B * d.H, d.N, d.D, stream),
                            what.c_str());
  else if (version == 2)
    cudabench::check_launch(attention_flash2_forward(q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(),
                                                     lse.data_ptr<float>(), scale, causal, fp16, d.B * d.H, d.N, d.D,
                                                     stream),
                            what.c_str());
  else
    cudabench::check_launch(attention_flash3_forward(q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(),
                                                     lse.data_ptr<float>(), scale, causal, fp16, d.B * d.H, d.N, d.D,
                                                     stream),
                            what.c_str());
}

// The backward from the forward's out and lse; its float32 scratch (delta, and flash2's dQ sums) is
// allocated here, through PyTorch's allocator.
void flash_backward(int version, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
                    const at::Tensor& lse, const at::Tensor& dout, at::Tensor& dq, at::Tensor& dk, at::Tensor& dv,
                    bool causal) {
  const Dims d = check_flash(q, k, v, version, true);
  check_flash_outputs(q, d, {{&out, "out"}, {&dout, "dout"}, {&dq, "dq"}, {&dk, "dk"}, {&dv, "dv"}}, lse);
  const c10::cuda::CUDAGuard guard(q.device());
  const float scale = 1.f / std::sqrt((float)d.D);
  const cudaStream_t stream = cudabench::stream_of(q);
  at::Tensor delta = at::empty({d.B, d.H, d.N}, q.options().dtype(at::kFloat));
  if (version == 1) {
    cudabench::check_launch(
        attention_flash1_backward(q.data_ptr<float>(), k.data_ptr<float>(), v.data_ptr<float>(), out.data_ptr<float>(),
                                  lse.data_ptr<float>(), dout.data_ptr<float>(), dq.data_ptr<float>(),
                                  dk.data_ptr<float>(), dv.data_ptr<float>(), delta.data_ptr<float>(), scale, causal,
                                  d.B * d.H, d.N, d.D, stream),
        "attn-flash1 backward");
    return;
  }
  const bool fp16 = q.scalar_type() == at::kHalf;
  if (version == 3) {
    cudabench::check_launch(
        attention_flash3_backward(q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), lse.data_ptr<float>(),
                                  dout.data_ptr(), dq.data_ptr(), dk.data_ptr(), dv.data_ptr(),
                                  delta.data_ptr<float>(), scale, causal, fp16, d.B * d.H, d.N, d.D, stream),
        "attn-flash3 backward");
    return;
  }
  at::Tensor dq_accum = at::empty(q.sizes(), q.options().dtype(at::kFloat));
  cudabench::check_launch(
      attention_flash2_backward(q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), lse.data_ptr<float>(),
                                dout.data_ptr(), dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), delta.data_ptr<float>(),
                                dq_accum.data_ptr<float>(), scale, causal, fp16, d.B * d.H, d.N, d.D, stream),
      "attn-flash2 backward");
}

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

// Why attn-flash3 cannot run on the current GPU, or "" (the variant is skipped there, not failed).
std::string flash3_not_here() {
  const char* why = attention_flash3_not_here();
  return why ? std::string("attn-flash3 ") + why : "";
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("flash3_not_here", &flash3_not_here, "why attn-flash3 cannot run on the current GPU, or an empty string");
  m.def("flash_forward", &flash_forward, "attn-flash1, 2 or 3 (version) forward into out and lse",
        py::arg("version"), py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"), py::arg("lse"), py::arg("causal"));
  m.def("flash_backward", &flash_backward, "attn-flash1, 2 or 3 backward into dq, dk, dv", py::arg("version"),
        py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"), py::arg("lse"), py::arg("dout"), py::arg("dq"),
        py::arg("dk"), py::arg("dv"), py::arg("causal"));
  m.def("naive_forward", &naive_forward, "attn-naive forward into out (P kept)", py::arg("q"), py::arg("k"),
        py::arg("v"), py::arg("out"), py::arg("P"), py::arg("causal"));
  m.def("naive_backward", &naive_backward, "attn-naive backward into dq, dk, dv", py::arg("q"), py::arg("k"),
        py::arg("v"), py::arg("out"), py::arg("P"), py::arg("dout"), py::arg("dq"), py::arg("dk"), py::arg("dv"),
        py::arg("dP"), py::arg("rows"));
}
