#include <cstdint>
#include <string>

#include "cudabench/binding.h"
#include "matmul.h"
#include "matmul_wgmma.h"

struct Sizes {
  int64_t M, N, K;
};

// A (M×K), B (K×N) and C (M×N): CUDA matrices of `dtype` on one device, each under 2^31 elements
Sizes check_matrices(const at::Tensor& A, const at::Tensor& B, const at::Tensor& C, at::ScalarType dtype) {
  cudabench::check_tensor(A, "A", dtype);
  cudabench::check_tensor(B, "B", dtype);
  cudabench::check_tensor(C, "C", dtype);
  TORCH_CHECK(A.dim() == 2 && B.dim() == 2 && C.dim() == 2, "A, B and C must be matrices");
  const int64_t M = A.size(0), K = A.size(1), N = B.size(1);
  TORCH_CHECK(B.size(0) == K,
              cudabench::message("A is ", M, "x", K, " but B is ", B.size(0), "x", N, ": inner sizes differ"));
  TORCH_CHECK(C.size(0) == M && C.size(1) == N, cudabench::message("C must be ", M, "x", N));
  TORCH_CHECK(M * K < (1LL << 31) && K * N < (1LL << 31) && M * N < (1LL << 31),
              "each matrix must have fewer than 2^31 elements");
  cudabench::check_same_device(A, B, "A", "B");
  cudabench::check_same_device(A, C, "A", "C");
  return {M, N, K};
}

// C = A · B into the caller's C. variant: 0 naive, 1 shared-memory tiled, 2 register-tiled.
void matmul(const at::Tensor& A, const at::Tensor& B, at::Tensor& C, int64_t variant) {
  const auto [M, N, K] = check_matrices(A, B, C, at::kFloat);
  const char* why = matmul_unsupported((int)variant, (int)M, (int)N, (int)K);
  TORCH_CHECK(why == nullptr, why ? why : "");
  TORCH_CHECK(variant != MATMUL_REGTILE || (reinterpret_cast<std::uintptr_t>(A.data_ptr()) % 16 == 0 &&
                                            reinterpret_cast<std::uintptr_t>(B.data_ptr()) % 16 == 0 &&
                                            reinterpret_cast<std::uintptr_t>(C.data_ptr()) % 16 == 0),
              "matmul-regtile needs 16-byte aligned A, B and C (float4 access); a fresh tensor is");
  const c10::cuda::CUDAGuard guard(A.device());
  cudabench::check_launch(
      matmul_launch((int)variant, A.data_ptr<float>(), B.data_ptr<float>(), C.data_ptr<float>(),
                    (int)M, (int)N, (int)K, cudabench::stream_of(A)),
      "matmul kernel");
}

// C = A · B for bfloat16 matrices on the Hopper pipeline (matmul-wgmma), tiles `bn` columns wide.
void matmul_wgmma(const at::Tensor& A, const at::Tensor& B, at::Tensor& C, int64_t bn) {
  const auto [M, N, K] = check_matrices(A, B, C, at::kBFloat16);
  const c10::cuda::CUDAGuard guard(A.device());
  const char* here = matmul_wgmma_not_here();
  TORCH_CHECK(here == nullptr, "matmul-wgmma ", here ? here : "");
  const char* why = matmul_wgmma_unsupported((int)M, (int)N, (int)K, (int)bn);
  TORCH_CHECK(why == nullptr, why ? why : "");
  for (const void* p : {A.data_ptr(), B.data_ptr(), C.data_ptr()})
    TORCH_CHECK(reinterpret_cast<std::uintptr_t>(p) % 16 == 0,
                "matmul-wgmma needs 16-byte aligned A, B and C (TMA); a fresh tensor is");
  cudabench::check_launch(matmul_wgmma_launch(A.data_ptr(), B.data_ptr(), C.data_ptr(), (int)M, (int)N, (int)K,
                                              (int)bn, cudabench::stream_of(A)),
                          "matmul-wgmma kernel");
}

// Why matmul-wgmma cannot run on the current GPU, or "" (the variant is skipped there, not failed).
std::string matmul_wgmma_not_here_reason() {
  const char* why = matmul_wgmma_not_here();
  return why ? std::string("matmul-wgmma ") + why : "";
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("matmul", &matmul, "C = A @ B for float32 CUDA matrices", py::arg("A"), py::arg("B"),
        py::arg("C"), py::arg("variant"));
  m.def("matmul_wgmma", &matmul_wgmma, "C = A @ B for bfloat16 CUDA matrices (sm_90a: TMA, wgmma)", py::arg("A"),
        py::arg("B"), py::arg("C"), py::arg("bn"));
  m.def("matmul_wgmma_not_here", &matmul_wgmma_not_here_reason,
        "why matmul-wgmma cannot run on the current GPU, or an empty string");
}
