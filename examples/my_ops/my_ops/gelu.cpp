// The torch binding: checks its input, then launches on PyTorch's current stream into a new output.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/extension.h>

#include "gelu.h"

at::Tensor gelu_tanh(const at::Tensor& x) {
  TORCH_CHECK(x.is_cuda(), "gelu_tanh: x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16,
              "gelu_tanh: x must be float32 or bfloat16, not ", x.scalar_type());
  const c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor input = x.contiguous();
  at::Tensor y = at::empty_like(input);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  cudaError_t err;
  if (input.scalar_type() == at::kFloat) {
    err = gelu_tanh_launch(input.data_ptr<float>(), y.data_ptr<float>(), input.numel(), stream);
  } else {
    err = gelu_tanh_launch(reinterpret_cast<const __nv_bfloat16*>(input.data_ptr<at::BFloat16>()),
                           reinterpret_cast<__nv_bfloat16*>(y.data_ptr<at::BFloat16>()), input.numel(), stream);
  }
  TORCH_CHECK(err == cudaSuccess, "gelu_tanh kernel: ", cudaGetErrorString(err));
  return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("gelu_tanh", &gelu_tanh, "tanh-approximated GELU of a float32 or bfloat16 CUDA tensor", py::arg("x"));
}
