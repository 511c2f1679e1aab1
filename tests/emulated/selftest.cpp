// Self-test of the emulator, independent of any kernel under test: the warp operations against the PTX
// fragment layouts (ldmatrix element by element, mma.sync against a float64 product), cp.async groups in
// the three landing modes, barriers and warp orders (a race must show), the checks that must abort, and
// the 16-bit conversions. Prints "selftest: N failures" and exits nonzero on any.
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>

#include <cudabench/tensor_core.cuh>

static int failures = 0;
#define CHECK(cond, ...)                                     \
  do {                                                       \
    if (!(cond) && failures++ < 20) {                        \
      printf("FAILED %s:%d: ", __FILE__, __LINE__);          \
      printf(__VA_ARGS__);                                   \
      printf("\n");                                          \
    }                                                        \
  } while (0)

// A distinct 16-bit value for element (row, col) of 8x8 matrix m.
static uint16_t element(int m, int row, int col) { return static_cast<uint16_t>(m * 1000 + row * 16 + col + 1); }
static uint32_t pair(uint16_t lo, uint16_t hi) { return lo | static_cast<uint32_t>(hi) << 16; }

// Each warp loads the same four matrices, whose rows lie scattered (48 bytes apart) in shared memory.
__global__ void ldmatrix_kernel(int* bad) {
  char* smem = emu::dynamic_smem;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  auto row_at = [&](int m, int row) { return smem + (m * 8 + row) * 48 + 16 * warp; };
  if (lane == 0)
    for (int m = 0; m < 4; ++m)
      for (int row = 0; row < 8; ++row)
        for (int col = 0; col < 8; ++col) {
          const uint16_t x = element(m, row, col);
          memcpy(row_at(m, row) + 2 * col, &x, 2);
        }
  __syncthreads();
  uint32_t plain[4], trans[4];
  tensor_core::ldmatrix_x4<false>(plain, row_at(lane / 8, lane % 8));
  tensor_core::ldmatrix_x4<true>(trans, row_at(lane / 8, lane % 8));
  const int g = lane / 4, t = lane % 4;
  for (int m = 0; m < 4; ++m) {
    *bad += plain[m] != pair(element(m, g, 2 * t), element(m, g, 2 * t + 1));
    *bad += trans[m] != pair(element(m, 2 * t, g), element(m, 2 * t + 1, g));
  }
}

// D = A B + C for A 16x16 (row-major), B 16x8 (k-major), C and D 16x8, in the m16n8k16 fragments.
template <typename S>
__global__ void mma_kernel(const float* A, const float* B, const float* C, float* D) {
  const int g = threadIdx.x / 4, t = threadIdx.x % 4;
  auto pk = [](float lo, float hi) { return tensor_core::pack_floats<S>(lo, hi); };
  auto a_pair = [&](int row, int k) { return pk(A[row * 16 + k], A[row * 16 + k + 1]); };
  auto b_pair = [&](int k, int col) { return pk(B[k * 8 + col], B[(k + 1) * 8 + col]); };
  const uint32_t a[4] = {a_pair(g, 2 * t), a_pair(g + 8, 2 * t), a_pair(g, 2 * t + 8), a_pair(g + 8, 2 * t + 8)};
  float d[4] = {C[g * 8 + 2 * t], C[g * 8 + 2 * t + 1], C[(g + 8) * 8 + 2 * t], C[(g + 8) * 8 + 2 * t + 1]};
  tensor_core::mma<S>(d, a, b_pair(2 * t, g), b_pair(2 * t + 8, g));
  D[g * 8 + 2 * t] = d[0];
  D[g * 8 + 2 * t + 1] = d[1];
  D[(g + 8) * 8 + 2 * t] = d[2];
  D[(g + 8) * 8 + 2 * t + 1] = d[3];
}

// Thread 0 issues two groups and records what shared memory holds before and after each wait.
__global__ void cp_async_kernel(const float* src, float* seen) {
  if (threadIdx.x != 0) return;
  float* smem = reinterpret_cast<float*>(emu::dynamic_smem);
  smem[0] = 1.f;
  smem[4] = 2.f;
  tensor_core::cp_async_16(smem, src, true);
  tensor_core::cp_async_commit();
  tensor_core::cp_async_16(smem + 4, src + 4, false);  // zeros
  tensor_core::cp_async_commit();
  seen[0] = smem[0];
  seen[1] = smem[4];
  tensor_core::cp_async_wait<1>();
  seen[2] = smem[0];
  seen[3] = smem[4];
  tensor_core::cp_async_wait<0>();
  seen[4] = smem[0];
  seen[5] = smem[4];
}

// Warp 1 reads what warp 0 writes, with or without a barrier between: the race must depend on the order.
__global__ void handoff_kernel(bool barrier, float* got) {
  float* smem = reinterpret_cast<float*>(emu::dynamic_smem);
  if (threadIdx.x == 0) smem[0] = 42.f;
  if (barrier) __syncthreads();
  if (threadIdx.x == 32) *got = smem[0];
}

__global__ void shuffle_kernel(float* out) {
  float x = static_cast<float>(threadIdx.x);
  for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  out[threadIdx.x] = x;
}

__global__ void divergent_kernel() {  // lanes 0-15 in an ldmatrix while 16-31 shuffle
  uint32_t r[4];
  if (threadIdx.x % 32 < 16) tensor_core::ldmatrix_x4<false>(r, emu::dynamic_smem);
  else __shfl_xor_sync(0xffffffffu, 1.f, 1);
}
__global__ void misaligned_ldmatrix_kernel() {
  uint32_t r[4];
  tensor_core::ldmatrix_x4<false>(r, emu::dynamic_smem + 8);
}
__global__ void cp_async_out_of_bounds_kernel(const float* src) {
  tensor_core::cp_async_16(emu::dynamic_smem + 64, src, true);  // 16 bytes past a 64-byte allocation
}
__global__ void uneven_barrier_kernel() {
  if (threadIdx.x < 32) __syncthreads();  // the other warp never arrives
}

static void test_ldmatrix() {
  int bad = 0;
  emu::launch(ldmatrix_kernel, 1, 64, 32 * 48 + 16, nullptr, &bad);
  CHECK(bad == 0, "ldmatrix: %d registers differ from the layout", bad);
}

template <typename S>
static void test_mma(const char* name) {
  float A[256], B[128], C[128], D[128];
  for (int i = 0; i < 256; ++i) A[i] = static_cast<float>(S(std::sin(i * 1.7) * 3));
  for (int i = 0; i < 128; ++i) {
    B[i] = static_cast<float>(S(std::cos(i * 0.9) * 2));
    C[i] = i * 0.25f - 7;
  }
  emu::launch(mma_kernel<S>, 1, 32, 0, nullptr, (const float*)A, (const float*)B, (const float*)C, D);
  for (int row = 0; row < 16; ++row)
    for (int col = 0; col < 8; ++col) {
      double want = C[row * 8 + col];
      for (int k = 0; k < 16; ++k) want += (double)A[row * 16 + k] * B[k * 8 + col];
      CHECK(std::fabs(D[row * 8 + col] - want) <= 1e-6 * (1 + std::fabs(want)), "mma %s (%d, %d): %g, want %g", name,
            row, col, D[row * 8 + col], want);
    }
}

static void test_cp_async() {
  alignas(16) float src[8] = {10, 11, 12, 13, 14, 15, 16, 17};
  const emu::CpAsyncLanding modes[3] = {emu::CpAsyncLanding::AtWait, emu::CpAsyncLanding::AtIssue,
                                        emu::CpAsyncLanding::PoisonUntilWait};
  const float want[3][6] = {{1, 2, 10, 2, 10, 0}, {10, 0, 10, 0, 10, 0}, {NAN, NAN, 10, NAN, 10, 0}};
  for (int m = 0; m < 3; ++m) {
    emu::schedule.landing = modes[m];
    float seen[6];
    emu::launch(cp_async_kernel, 1, 32, 64, nullptr, (const float*)src, seen);
    for (int i = 0; i < 6; ++i)
      CHECK(seen[i] == want[m][i] || (std::isnan(seen[i]) && std::isnan(want[m][i])), "cp.async mode %d: seen[%d] = %g",
            m, i, seen[i]);
  }
  emu::schedule = emu::Schedule{};
}

static void test_orders_and_barriers() {
  for (bool barrier : {false, true}) {
    float got[2];
    for (int reverse = 0; reverse < 2; ++reverse) {
      emu::schedule.order = reverse ? emu::WarpOrder::Reverse : emu::WarpOrder::Forward;
      emu::launch(handoff_kernel, 1, 64, 16, nullptr, barrier, &got[reverse]);
    }
    const bool same = got[0] == got[1];
    CHECK(same == barrier, "barrier %d: forward order read %g, reverse %g", barrier, got[0], got[1]);
  }
  emu::schedule = emu::Schedule{};
  float sums[64];
  emu::launch(shuffle_kernel, 1, 64, 0, nullptr, sums);
  for (int t = 0; t < 64; ++t) CHECK(sums[t] == (t < 32 ? 496.f : 1520.f), "warp sum at thread %d: %g", t, sums[t]);
  emu::launch(uneven_barrier_kernel, 1, 64, 0, nullptr);
  CHECK(cudaGetLastError() == cudaErrorLaunchFailure, "a deadlocked block is not reported");
}

// fn() must end in an emulator abort (run in a child process, its report silenced).
template <typename F>
static void expect_abort(const char* what, F fn) {
  fflush(stdout);
  const pid_t child = fork();
  if (child == 0) {
    if (!freopen("/dev/null", "w", stderr)) _exit(3);
    fn();
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "%s: not caught", what);
}

static void test_checks() {
  alignas(16) static float src[4];
  expect_abort("divergent warp collectives", [] { emu::launch(divergent_kernel, 1, 32, 64, nullptr); });
  expect_abort("misaligned ldmatrix", [] { emu::launch(misaligned_ldmatrix_kernel, 1, 32, 64, nullptr); });
  expect_abort("cp.async past shared memory",
               [] { emu::launch(cp_async_out_of_bounds_kernel, 1, 32, 64, nullptr, (const float*)src); });
  emu::launch(shuffle_kernel, 1, 64, 48 * 1024 + 16, nullptr, (float*)nullptr);
  CHECK(cudaGetLastError() == cudaErrorInvalidValue, "more than 48 KB of shared memory without the opt-in");
}

// Rounding of float -> 16 bits on a sample of all floats: half against the compiler's _Float16 where
// there is one, bfloat16 against round-half-to-even on the dropped bits.
static void test_conversions() {
  for (uint64_t i = 0; i <= 0xffffffffull; i += 4099) {
    const uint32_t u = static_cast<uint32_t>(i);
    float f;
    memcpy(&f, &u, 4);
    if (std::isnan(f)) continue;
#ifdef __FLT16_MAX__
    const _Float16 h = static_cast<_Float16>(f);
    uint16_t want;
    memcpy(&want, &h, 2);
    CHECK(__half(f).x == want, "half(%08x) = %04x, want %04x", u, __half(f).x, want);
#endif
    const uint32_t dropped = u & 0xffffu, up = dropped > 0x8000u || (dropped == 0x8000u && (u >> 16) & 1u);
    CHECK(__nv_bfloat16(f).x == static_cast<uint16_t>((u >> 16) + up), "bf16(%08x) = %04x", u, __nv_bfloat16(f).x);
  }
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {  // half -> float, exhaustively
    const float f = __half::to_float(static_cast<uint16_t>(bits));
    if ((bits & 0x7fff) < 0x7c01) CHECK(__half(f).x == bits, "half %04x does not round-trip", bits);
#ifdef __FLT16_MAX__
    _Float16 h;
    memcpy(&h, &bits, 2);  // little-endian: the low half of bits
    CHECK(f == static_cast<float>(h) || (std::isnan(f) && std::isnan(static_cast<float>(h))), "half %04x widens", bits);
#endif
  }
}

int main() {
  test_ldmatrix();
  test_mma<__nv_bfloat16>("bf16");
  test_mma<__half>("f16");
  test_cp_async();
  test_orders_and_barriers();
  test_checks();
  test_conversions();
  printf("selftest: %d failures\n", failures);
  return failures != 0;
}
