// Checks one case of the attention family's kernels (kernels/attention) on the emulator, the way the
// harness checks them on a GPU: random normal inputs rounded to the dtype, outputs and scratch filled
// with NaN first, every output against a float64 reference of softmax(Q Kᵀ/√D [causal]) V and its
// gradients computed on the rounded inputs, judged by ‖got − ref‖ / ‖ref‖ (max |got| where the
// reference is exactly zero, as N = 1's dQ and dK) against the family's tolerance.
// The case runs under two schedules, which must also agree bit for bit (a race shows as a difference):
// warps forward with cp.async, TMA and wgmma landing at their waits, and warps in reverse with cp.async
// data poisoned until its wait, TMA boxes and wgmma products landing at their issue.
//
// usage: attention_check VARIANT DTYPE BH N D CAUSAL [TOLERANCE]
//   VARIANT attn-naive or attn-flash1 (DTYPE float32), attn-flash2 or attn-flash3 (DTYPE bfloat16 or float16).
//   TOLERANCE defaults to the harness's: 5e-5 in float32 (kernels/attention/spec.py) plus 4 units of
//   roundoff in 16 bits (Family.tolerance_for in cudabench/spec/family.py).
// Prints a line per schedule, one on the bitwise comparison, then RESULT OK (exit 0) or RESULT FAIL (1).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "attention.h"

namespace {

enum class Dtype { Float32, Bfloat16, Float16 };

struct Case {
  std::string variant, dtype_name;
  Dtype dtype;
  int BH, N, D;
  bool causal;
  double tolerance;
  bool outliers = false, seeded = false;  // the inputs' kind and seed, when given
  unsigned seed = 0;
  std::string name() const {
    char s[128];
    snprintf(s, sizeof s, "%s %s BH=%d N=%d D=%d causal=%d", variant.c_str(), dtype_name.c_str(), BH, N, D, causal);
    return s;
  }
};

// `count` elements of a dtype in 64-byte aligned memory, created as 0xff bytes: NaN in every dtype.
class Tensor {
 public:
  Tensor(Dtype dtype, size_t count)
      : dtype_(dtype), bytes_(count * (dtype == Dtype::Float32 ? 4 : 2)),
        data_(static_cast<unsigned char*>(aligned_alloc(64, (bytes_ / 64 + 1) * 64)), free) {
    memset(data_.get(), 0xff, bytes_);
  }
  void* data() const { return data_.get(); }
  float* floats() const { return reinterpret_cast<float*>(data_.get()); }
  size_t bytes() const { return bytes_; }
  double get(size_t i) const {
    if (dtype_ == Dtype::Float32) return floats()[i];
    const uint16_t bits = reinterpret_cast<const uint16_t*>(data_.get())[i];
    return dtype_ == Dtype::Float16 ? __half::to_float(bits) : __nv_bfloat16::to_float(bits);
  }
  void set(size_t i, float x) {  // rounded to the dtype
    if (dtype_ == Dtype::Float32) floats()[i] = x;
    else reinterpret_cast<uint16_t*>(data_.get())[i] = dtype_ == Dtype::Float16 ? __half(x).x : __nv_bfloat16(x).x;
  }

 private:
  Dtype dtype_;
  size_t bytes_;
  std::unique_ptr<unsigned char, decltype(&free)> data_;
};

struct Inputs {
  Tensor q, k, v, dout;
};
struct Outputs {  // what the kernels produce (lse: the flash variants only)
  Tensor out, lse, dq, dk, dv;
};
struct Reference {
  std::vector<double> out, lse, dq, dk, dv;
};

// Normal values; with `outliers`, 1 in 100 of q, k and v 100 times larger, as the harness draws them
// (cudabench.spec.distributions: the upstream gradient keeps its own draw).
Inputs random_inputs(const Case& c, unsigned seed) {
  const size_t n = (size_t)c.BH * c.N * c.D;
  Inputs in{Tensor(c.dtype, n), Tensor(c.dtype, n), Tensor(c.dtype, n), Tensor(c.dtype, n)};
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_real_distribution<float> uniform(0.f, 1.f);
  for (Tensor* t : {&in.q, &in.k, &in.v, &in.dout})
    for (size_t i = 0; i < n; ++i) {
      const float x = normal(gen);
      t->set(i, c.outliers && t != &in.dout && uniform(gen) < 0.01f ? 100 * x : x);
    }
  return in;
}

// One head of the reference: rows i of Q, keys j of K, P = softmax(scale Q Kᵀ), dS = P ∘ (dO Vᵀ − rowsum(dO ∘ O)).
void reference_head(const Case& c, const Inputs& in, size_t head, Reference& ref) {
  const int N = c.N, D = c.D;
  const double scale = 1.0 / std::sqrt((double)D);
  const size_t base = head * N * D;
  auto at = [&](const Tensor& t, int row, int d) { return t.get(base + (size_t)row * D + d); };
  std::vector<double> p(N);
  for (int i = 0; i < N; ++i) {
    const int keys = c.causal ? i + 1 : N;
    double top = -INFINITY, sum = 0, delta = 0;
    for (int j = 0; j < keys; ++j) {
      p[j] = 0;
      for (int d = 0; d < D; ++d) p[j] += at(in.q, i, d) * at(in.k, j, d);
      p[j] *= scale;
      top = std::max(top, p[j]);
    }
    for (int j = 0; j < keys; ++j) sum += std::exp(p[j] - top);
    const double lse = top + std::log(sum);
    ref.lse[head * N + i] = lse;
    for (int j = 0; j < keys; ++j) p[j] = std::exp(p[j] - lse);
    for (int d = 0; d < D; ++d) {
      double o = 0;
      for (int j = 0; j < keys; ++j) o += p[j] * at(in.v, j, d);
      ref.out[base + (size_t)i * D + d] = o;
      delta += o * at(in.dout, i, d);
    }
    for (int j = 0; j < keys; ++j) {
      double dp = 0;
      for (int d = 0; d < D; ++d) dp += at(in.dout, i, d) * at(in.v, j, d);
      const double ds = p[j] * (dp - delta) * scale;
      for (int d = 0; d < D; ++d) {
        ref.dv[base + (size_t)j * D + d] += p[j] * at(in.dout, i, d);
        ref.dq[base + (size_t)i * D + d] += ds * at(in.k, j, d);
        ref.dk[base + (size_t)j * D + d] += ds * at(in.q, i, d);
      }
    }
  }
}

Reference reference(const Case& c, const Inputs& in) {
  const size_t n = (size_t)c.BH * c.N * c.D;
  Reference ref{std::vector<double>(n), std::vector<double>((size_t)c.BH * c.N), std::vector<double>(n),
                std::vector<double>(n), std::vector<double>(n)};
  for (int head = 0; head < c.BH; ++head) reference_head(c, in, head, ref);
  return ref;
}

// Each variant's forward then backward, with NaN-filled scratch; the first error, or cudaSuccess.
cudaError_t run_naive(const Case& c, const Inputs& in, Outputs& out, float scale) {
  const size_t scores = (size_t)c.BH * c.N * c.N;
  Tensor P(Dtype::Float32, scores), dP(Dtype::Float32, scores), row_sums(Dtype::Float32, (size_t)c.BH * c.N);
  const cudaError_t e = attention_naive_forward(in.q.floats(), in.k.floats(), in.v.floats(), out.out.floats(),
                                                P.floats(), scale, c.causal, c.BH, c.N, c.D, nullptr);
  return e ? e : attention_naive_backward(in.q.floats(), in.k.floats(), in.v.floats(), out.out.floats(), P.floats(),
                                          in.dout.floats(), out.dq.floats(), out.dk.floats(), out.dv.floats(),
                                          dP.floats(), row_sums.floats(), scale, c.BH, c.N, c.D, nullptr);
}

cudaError_t run_flash1(const Case& c, const Inputs& in, Outputs& out, float scale) {
  Tensor delta(Dtype::Float32, (size_t)c.BH * c.N);
  const cudaError_t e = attention_flash1_forward(in.q.floats(), in.k.floats(), in.v.floats(), out.out.floats(),
                                                 out.lse.floats(), scale, c.causal, c.BH, c.N, c.D, nullptr);
  return e ? e : attention_flash1_backward(in.q.floats(), in.k.floats(), in.v.floats(), out.out.floats(),
                                           out.lse.floats(), in.dout.floats(), out.dq.floats(), out.dk.floats(),
                                           out.dv.floats(), delta.floats(), scale, c.causal, c.BH, c.N, c.D, nullptr);
}

cudaError_t run_flash2(const Case& c, const Inputs& in, Outputs& out, float scale) {
  const bool fp16 = c.dtype == Dtype::Float16;
  Tensor delta(Dtype::Float32, (size_t)c.BH * c.N), dq_accum(Dtype::Float32, (size_t)c.BH * c.N * c.D);
  const cudaError_t e = attention_flash2_forward(in.q.data(), in.k.data(), in.v.data(), out.out.data(),
                                                 out.lse.floats(), scale, c.causal, fp16, c.BH, c.N, c.D, nullptr);
  return e ? e : attention_flash2_backward(in.q.data(), in.k.data(), in.v.data(), out.out.data(), out.lse.floats(),
                                           in.dout.data(), out.dq.data(), out.dk.data(), out.dv.data(),
                                           delta.floats(), dq_accum.floats(), scale, c.causal, fp16, c.BH, c.N, c.D,
                                           nullptr);
}

cudaError_t run_flash3(const Case& c, const Inputs& in, Outputs& out, float scale) {
  const bool fp16 = c.dtype == Dtype::Float16;
  Tensor delta(Dtype::Float32, (size_t)c.BH * c.N);
  const cudaError_t e = attention_flash3_forward(in.q.data(), in.k.data(), in.v.data(), out.out.data(),
                                                 out.lse.floats(), scale, c.causal, fp16, c.BH, c.N, c.D, nullptr);
  return e ? e : attention_flash3_backward(in.q.data(), in.k.data(), in.v.data(), out.out.data(), out.lse.floats(),
                                           in.dout.data(), out.dq.data(), out.dk.data(), out.dv.data(),
                                           delta.floats(), scale, c.causal, fp16, c.BH, c.N, c.D, nullptr);
}

cudaError_t run_variant(const Case& c, const Inputs& in, Outputs& out) {
  const float scale = 1.f / std::sqrt((float)c.D);
  if (c.variant == "attn-naive") return run_naive(c, in, out, scale);
  if (c.variant == "attn-flash1") return run_flash1(c, in, out, scale);
  if (c.variant == "attn-flash3") return run_flash3(c, in, out, scale);
  return run_flash2(c, in, out, scale);
}

struct Error {
  double value = 0;       // ‖got − ref‖ / ‖ref‖, or max |got − ref| where ref is all zero
  bool absolute = false;
  size_t nonfinite = 0;   // NaN or inf elements (unwritten ones among them)
};

Error error(const Tensor& got, const std::vector<double>& ref) {
  Error e;
  double diff2 = 0, ref2 = 0, worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double x = got.get(i);
    if (!std::isfinite(x)) {
      ++e.nonfinite;
      continue;
    }
    diff2 += (x - ref[i]) * (x - ref[i]);
    ref2 += ref[i] * ref[i];
    worst = std::max(worst, std::fabs(x - ref[i]));
  }
  e.absolute = ref2 == 0;
  e.value = e.absolute ? worst : std::sqrt(diff2 / ref2);
  return e;
}

uint64_t fnv1a(const Outputs& o) {  // over every output's bytes
  uint64_t h = 1469598103934665603ull;
  for (const Tensor* t : {&o.out, &o.lse, &o.dq, &o.dk, &o.dv})
    for (size_t i = 0; i < t->bytes(); ++i) h = (h ^ static_cast<const unsigned char*>(t->data())[i]) * 1099511628211ull;
  return h;
}

struct Schedule {
  const char* name;
  emu::Schedule setting;
};

// Prints each output's error; true if all are finite and within the tolerance.
bool print_errors(const Case& c, const Outputs& out, const Reference& ref) {
  std::vector<std::pair<const char*, Error>> errors = {{"out", error(out.out, ref.out)}};
  if (c.variant != "attn-naive") errors.push_back({"lse", error(out.lse, ref.lse)});  // naive keeps P instead
  errors.push_back({"dq", error(out.dq, ref.dq)});
  errors.push_back({"dk", error(out.dk, ref.dk)});
  errors.push_back({"dv", error(out.dv, ref.dv)});
  bool ok = true;
  for (const auto& [name, e] : errors) {
    if (e.nonfinite) printf(" %s NaN:%zu", name, e.nonfinite);
    else printf(" %s %.2e%s", name, e.value, e.absolute ? "(abs)" : "");
    ok = ok && !e.nonfinite && e.value <= c.tolerance;
  }
  return ok;
}

// Runs the case under one schedule and prints its line; true if every output is within tolerance.
bool check_schedule(const Case& c, const Inputs& in, const Reference& ref, const Schedule& s, uint64_t& hash) {
  emu::schedule = s.setting;
  const size_t n = (size_t)c.BH * c.N * c.D;
  Outputs out{Tensor(c.dtype, n), Tensor(Dtype::Float32, (size_t)c.BH * c.N), Tensor(c.dtype, n), Tensor(c.dtype, n),
              Tensor(c.dtype, n)};
  const auto start = std::chrono::steady_clock::now();
  const cudaError_t status = run_variant(c, in, out);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  hash = fnv1a(out);
  printf("%s | %-14s |", c.name().c_str(), s.name);
  bool ok = print_errors(c, out, ref) && status == cudaSuccess;
  if (status != cudaSuccess) printf(" | launch error %d", status);
  printf(" | tol %.2e | %.2fs | %s\n", c.tolerance, seconds, ok ? "OK" : "FAIL");
  fflush(stdout);
  return ok;
}

bool parse(int argc, char** argv, Case& c) {
  if (argc != 7 && argc != 8 && argc != 10) return false;
  c.variant = argv[1];
  c.dtype_name = argv[2];
  if ((c.variant == "attn-naive" || c.variant == "attn-flash1") && c.dtype_name == "float32") {
    c.dtype = Dtype::Float32;
  } else if ((c.variant == "attn-flash2" || c.variant == "attn-flash3") && (c.dtype_name == "bfloat16" || c.dtype_name == "float16")) {
    c.dtype = c.dtype_name == "float16" ? Dtype::Float16 : Dtype::Bfloat16;
  } else {
    return false;
  }
  c.BH = atoi(argv[3]);
  c.N = atoi(argv[4]);
  c.D = atoi(argv[5]);
  c.causal = atoi(argv[6]) != 0;
  const double roundoff = c.dtype == Dtype::Float32 ? 0 : c.dtype == Dtype::Bfloat16 ? 0x1p-8 : 0x1p-11;
  c.tolerance = argc >= 8 ? atof(argv[7]) : 5e-5 + 4 * roundoff;
  if (argc == 10) {
    const std::string kind = argv[8];
    if (kind != "normal" && kind != "outliers") return false;
    c.outliers = kind == "outliers";
    c.seed = (unsigned)strtoul(argv[9], nullptr, 10);
    c.seeded = true;
  }
  return c.BH > 0 && c.N > 0 && (c.D == 64 || c.D == 128) && c.tolerance > 0;
}

}  // namespace

int main(int argc, char** argv) {
  Case c;
  if (!parse(argc, argv, c)) {
    fprintf(stderr, "usage: %s attn-naive|attn-flash1|attn-flash2|attn-flash3 float32|bfloat16|float16 BH N D(64|128) CAUSAL(0|1) "
                    "[TOLERANCE [normal|outliers SEED]]\n", argv[0]);
    return 2;
  }
  const Inputs in = random_inputs(c, c.seeded ? c.seed : 1000u + 7u * c.N + 3u * c.D + 5u * c.causal + 11u * (unsigned)c.dtype);
  const Reference ref = reference(c, in);
  // the second also lands TMA boxes and wgmma products at their issue (attn-flash3)
  const Schedule schedules[2] = {
      {"forward/lazy", {emu::WarpOrder::Forward, emu::CpAsyncLanding::AtWait, emu::WgmmaLanding::AtWait,
                        emu::TmaLanding::AtPhase}},
      {"reverse/poison", {emu::WarpOrder::Reverse, emu::CpAsyncLanding::PoisonUntilWait, emu::WgmmaLanding::AtIssue,
                          emu::TmaLanding::AtIssue}}};
  uint64_t hashes[2];
  bool ok = true;
  for (int i = 0; i < 2; ++i) ok &= check_schedule(c, in, ref, schedules[i], hashes[i]);
  const bool same = hashes[0] == hashes[1];
  printf("%s | schedules %s bit for bit | %s\n", c.name().c_str(), same ? "agree" : "DIFFER", same ? "OK" : "FAIL");
  printf("RESULT %s\n", ok && same ? "OK" : "FAIL");
  return ok && same ? 0 : 1;
}
