#include <cstdint>

#include "cudabench/binding.h"
#include "timex.h"

namespace {

struct Dims {
  int B, C, T;
};

// float32 for versions 1..6; timex-fft (6) also takes bfloat16 and float16, timex-mma (7) and timex-wgmma (8)
// only those.
TimexDtype dtype_of(const at::Tensor& k, int64_t version) {
  const at::ScalarType t = k.scalar_type();
  const bool low = t == at::kBFloat16 || t == at::kHalf;
  if (version >= 7) {
    TORCH_CHECK(low, cudabench::message("k must be bfloat16 or float16 for ", version == 8 ? "timex-wgmma" : "timex-mma",
                                        " (tensor cores; got ", t, ")"));
  } else if (t != at::kFloat) {
    TORCH_CHECK(version == 6 && low, cudabench::message("k must be float32", version == 6 ? ", bfloat16 or float16" : "",
                                                        " for timex-v", version, " (got ", t, ")"));
  }
  return t == at::kFloat ? TIMEX_F32 : t == at::kBFloat16 ? TIMEX_BF16 : TIMEX_F16;
}

Dims check_inputs(const at::Tensor& w, const at::Tensor& k, int64_t version, bool backward) {
  dtype_of(k, version);
  cudabench::check_tensor(k, "k", k.scalar_type());
  cudabench::check_tensor(w, "w", k.scalar_type());
  cudabench::check_same_device(w, k, "w", "k");
  TORCH_CHECK(k.dim() == 3, cudabench::message("k must be (B, C, T), got ", k.sizes()));
  TORCH_CHECK(w.dim() == 2, cudabench::message("w must be (C, T), got ", w.sizes()));
  const Dims d{(int)k.size(0), (int)k.size(1), (int)k.size(2)};
  TORCH_CHECK(w.size(0) == d.C && w.size(1) == d.T,
              cudabench::message("w must be (C, T) = (", d.C, ", ", d.T, "), got ", w.sizes()));
  const char* why = timex_unsupported((int)version, d.B, d.C, d.T, backward);
  TORCH_CHECK(why == nullptr, cudabench::message("timex-v", version, " at B=", d.B, ", C=", d.C, ", T=", d.T, ": ",
                                  why ? why : ""));
  if (version >= 7)  // what this GPU offers: tensor-core instructions, and shared memory per block
    cudabench::check_mma_device(k, "timex-mma", timex_mma_smem(d.T, backward), cudabench::message("T=", d.T),
                                " (use a shorter T)");
  if (version == 8) {
    const c10::cuda::CUDAGuard guard(k.device());
    const char* here = timex_wgmma_not_here();
    TORCH_CHECK(here == nullptr, "timex-wgmma ", here ? here : "");
  }
  return d;
}

// timex-wgmma reads its rows by TMA and cp.async and writes 16-byte pieces: each tensor it touches so
void check_wgmma_aligned(std::initializer_list<const at::Tensor*> tensors, const char* names) {
  for (const at::Tensor* t : tensors)
    TORCH_CHECK(reinterpret_cast<std::uintptr_t>(t->data_ptr()) % 16 == 0, "timex-wgmma needs 16-byte aligned ", names,
                " (TMA, cp.async, 16-byte stores); a fresh tensor is, a view into another may not be");
}

void check_output(const at::Tensor& o, const at::Tensor& like, const char* name) {
  cudabench::check_tensor(o, name, like.scalar_type());
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
  at::Tensor scratch = at::empty({(int64_t)scratch_floats}, k.options().dtype(at::kFloat));
  float* s = scratch_floats ? scratch.data_ptr<float>() : nullptr;
  const TimexDtype dtype = dtype_of(k, version);
  const cudaStream_t stream = cudabench::stream_of(k);
  if (version == 8) check_wgmma_aligned({&w, &k, &out}, "w, k and out");
  cudabench::check_launch(
      version == 8   ? timex_wgmma_forward(dtype, w.data_ptr(), k.data_ptr(), out.data_ptr(), (float)eps, d.B, d.C,
                                           d.T, stream)
      : version == 7 ? timex_mma_forward(dtype, w.data_ptr(), k.data_ptr(), out.data_ptr(), (float)eps, d.B, d.C, d.T,
                                         stream)
      : dtype == TIMEX_F32 ? timex_forward((int)version, w.data_ptr<float>(), k.data_ptr<float>(),
                                           out.data_ptr<float>(), (float)eps, s, d.B, d.C, d.T, stream)
                           : timex_fft_forward(dtype, w.data_ptr(), k.data_ptr(), out.data_ptr(), (float)eps, s, d.B,
                                               d.C, d.T, stream),
      "timex forward");
}

// timex-wgmma's backward: gk, then gw
static cudaError_t wgmma_backward(TimexDtype dtype, const at::Tensor& w, const at::Tensor& k, const at::Tensor& g,
                                  at::Tensor& gw, at::Tensor& gk, const Dims& d, cudaStream_t stream) {
  const cudaError_t err = timex_wgmma_gk(dtype, w.data_ptr(), g.data_ptr(), gk.data_ptr(), d.B, d.C, d.T, stream);
  return err != cudaSuccess ? err : timex_wgmma_gw(dtype, k.data_ptr(), g.data_ptr(), gw.data_ptr(), d.B, d.C, d.T, stream);
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
  at::Tensor scratch = at::empty({(int64_t)scratch_floats}, k.options().dtype(at::kFloat));
  float* s = scratch_floats ? scratch.data_ptr<float>() : nullptr;
  const TimexDtype dtype = dtype_of(k, version);
  const cudaStream_t stream = cudabench::stream_of(k);
  if (version == 8) check_wgmma_aligned({&w, &k, &g, &gk}, "w, k, g and gk");
  cudabench::check_launch(
      version == 8 ? wgmma_backward(dtype, w, k, g, gw, gk, d, stream)
      : version == 7 ? timex_mma_backward(dtype, w.data_ptr(), k.data_ptr(), g.data_ptr(), gw.data_ptr(), gk.data_ptr(),
                                        s, d.B, d.C, d.T, stream)
      : dtype == TIMEX_F32
          ? timex_backward((int)version, w.data_ptr<float>(), k.data_ptr<float>(), g.data_ptr<float>(),
                           gw.data_ptr<float>(), gk.data_ptr<float>(), s, d.B, d.C, d.T, stream)
          : timex_fft_backward(dtype, w.data_ptr(), k.data_ptr(), g.data_ptr(), gw.data_ptr(), gk.data_ptr(), s, d.B,
                               d.C, d.T, stream),
      "timex backward");
}

// timex-fft's forward when a backward follows: beyond T = 1024 it returns the spectra it made (and each
// row of k's) for backward_saved; an empty tensor where nothing is kept (out is written either way).
at::Tensor forward_saving(const at::Tensor& w, const at::Tensor& k, at::Tensor& out, double eps) {
  const Dims d = check_inputs(w, k, 6, false);
  check_output(out, k, "out");
  const size_t floats = timex_fft_saved_floats(d.B, d.C, d.T);
  if (floats == 0) {
    forward(w, k, out, eps, 6);
    return at::Tensor();
  }
  const c10::cuda::CUDAGuard guard(k.device());
  at::Tensor saved = at::empty({(int64_t)floats}, k.options().dtype(at::kFloat));
  cudabench::check_launch(timex_fft_forward_saving(dtype_of(k, 6), w.data_ptr(), k.data_ptr(), out.data_ptr(),
                                                   (float)eps, saved.data_ptr<float>(), d.B, d.C, d.T,
                                                   cudabench::stream_of(k)),
                          "timex-fft forward");
  return saved;
}

// timex-fft's backward from what forward_saving returned (it must come from the same w and k).
void backward_saved(const at::Tensor& w, const at::Tensor& k, const at::Tensor& g, at::Tensor& gw, at::Tensor& gk,
                    at::Tensor& saved) {
  const Dims d = check_inputs(w, k, 6, true);
  check_output(g, k, "g");
  check_output(gk, k, "gk");
  check_output(gw, w, "gw");
  cudabench::check_tensor(saved, "saved", at::kFloat);
  cudabench::check_same_device(saved, k, "saved", "k");
  TORCH_CHECK(saved.numel() == (int64_t)timex_fft_saved_floats(d.B, d.C, d.T),
              cudabench::message("saved must be what forward_saving returned at this shape (", saved.numel(),
                                 " floats)"));
  const c10::cuda::CUDAGuard guard(k.device());
  cudabench::check_launch(timex_fft_backward_saved(dtype_of(k, 6), w.data_ptr(), k.data_ptr(), g.data_ptr(),
                                                   gw.data_ptr(), gk.data_ptr(), saved.data_ptr<float>(), d.B, d.C,
                                                   d.T, cudabench::stream_of(k)),
                          "timex-fft backward");
}

// Why timex-wgmma cannot run on the current GPU, or "" (the variant is skipped there, not failed).
std::string wgmma_not_here() {
  const char* why = timex_wgmma_not_here();
  return why ? std::string("timex-wgmma ") + why : "";
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward, "TimeX forward into out", py::arg("w"), py::arg("k"), py::arg("out"),
        py::arg("eps"), py::arg("version"));
  m.def("backward", &backward, "TimeX backward into gw, gk", py::arg("w"), py::arg("k"), py::arg("g"),
        py::arg("gw"), py::arg("gk"), py::arg("version"));
  m.def("forward_saving", &forward_saving, "timex-fft forward into out, keeping its spectra for backward_saved",
        py::arg("w"), py::arg("k"), py::arg("out"), py::arg("eps"));
  m.def("backward_saved", &backward_saved, "timex-fft backward into gw, gk from forward_saving's spectra",
        py::arg("w"), py::arg("k"), py::arg("g"), py::arg("gw"), py::arg("gk"), py::arg("saved"));
  m.def("wgmma_not_here", &wgmma_not_here, "why timex-wgmma cannot run on the current GPU, or an empty string");
}
