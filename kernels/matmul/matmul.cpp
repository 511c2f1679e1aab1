#include <cstdint>

#include "cudabench/binding.h"
#include "matmul.h"

// C = A · B into the caller's C. variant: 0 naive, 1 shared-memory tiled, 2 register-tiled.
void matmul(const at::Tensor& A, const at::Tensor& B, at::Tensor& C, int64_t variant) {
  cudabench::check_tensor(A, "A");
  cudabench::check_tensor(B, "B");
  cudabench::check_tensor(C, "C");
  TORCH_CHECK(A.dim() == 2 && B.dim() == 2 && C.dim() == 2, "A, B and C must be matrices");
  const int64_t M = A.size(0), K = A.size(1), N = B.size(1);
  TORCH_CHECK(B.size(0) == K,
              cudabench::message("A is ", M, "x", K, " but B is ", B.size(0), "x", N, ": inner sizes differ"));
  TORCH_CHECK(C.size(0) == M && C.size(1) == N, cudabench::message("C must be ", M, "x", N));
  TORCH_CHECK(M * K < (1LL << 31) && K * N < (1LL << 31) && M * N < (1LL << 31),
              "each matrix must have fewer than 2^31 elements");
  const char* why = matmul_unsupported((int)variant, (int)M, (int)N, (int)K);
  TORCH_CHECK(why == nullptr, why ? why : "");
  TORCH_CHECK(variant != MATMUL_REGTILE || (reinterpret_cast<std::uintptr_t>(A.data_ptr()) % 16 == 0 &&
                                            reinterpret_cast<std::uintptr_t>(B.data_ptr()) % 16 == 0 &&
                                            reinterpret_cast<std::uintptr_t>(C.data_ptr()) % 16 == 0),
              "matmul-regtile needs 16-byte aligned A, B and C (float4 access); a fresh tensor is");
  cudabench::check_same_device(A, B, "A", "B");
  cudabench::check_same_device(A, C, "A", "C");
  const c10::cuda::CUDAGuard guard(A.device());
  cudabench::check_launch(
      matmul_launch((int)variant, A.data_ptr<float>(), B.data_ptr<float>(), C.data_ptr<float>(),
                    (int)M, (int)N, (int)K, cudabench::stream_of(A)),
      "matmul kernel");
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("matmul", &matmul, "C = A @ B for float32 CUDA matrices", py::arg("A"), py::arg("B"),
        py::arg("C"), py::arg("variant"));
}
