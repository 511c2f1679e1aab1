// Warp-collective operations (__shfl_xor_sync, __shfl_sync, ldmatrix, mma.sync m16n8k16) and cp.async on the
// emulator.
//
// A collective is an exchange: each lane leaves its operands in a slot, waits at its warp's barrier,
// then reads the 32 slots of its warp. The exchange checks that all 32 lanes are in the same operation
// (same kind, same sequence number): a lane that skipped or added one is divergence, reported and fatal.
// Slots are double-buffered by the parity of the sequence number: a lane can only reach operation n + 2
// (which reuses n's buffer) after every lane has arrived at n + 1, that is after every lane read n.
#include "fibers.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudabench/tensor_core.cuh>  // the declarations this file defines

namespace emu {
namespace {

enum class Op { Shuffle, ShuffleIndexed, Ldmatrix, LdmatrixTrans, MmaBf16, MmaF16 };
const char* name(Op op) {
  static const char* names[] = {"shfl.bfly", "shfl.idx", "ldmatrix", "ldmatrix.trans", "mma.bf16", "mma.f16"};
  return names[static_cast<int>(op)];
}

struct Slot {
  Op op;
  long sequence;
  float value;      // shuffle
  const char* row;  // ldmatrix: this lane's row address
  uint32_t a[4];    // mma: this lane's A fragment
  uint32_t b[2];    // mma: this lane's B fragment
};
std::vector<Slot> slots[2];

// Deposits `mine`, waits for the warp, and returns the warp's 32 slots (index them by lane).
const Slot* exchange(Slot mine) {
  if (detail::fibers.size() % detail::WARP)
    fail("%s in a block of %zu threads (a partial warp)", name(mine.op), detail::fibers.size());
  detail::Fiber& f = detail::current_fiber();
  mine.sequence = f.collectives++;
  std::vector<Slot>& buffer = slots[mine.sequence & 1];
  buffer[current_thread] = mine;
  detail::warp_barrier();
  const Slot* warp = &buffer[current_thread / detail::WARP * detail::WARP];
  for (unsigned l = 0; l < detail::WARP; ++l)
    if (warp[l].op != mine.op || warp[l].sequence != mine.sequence)
      fail("divergent warp collective: lane %u is in %s #%ld, lane %u in %s #%ld", current_thread % detail::WARP,
           name(mine.op), mine.sequence, l, name(warp[l].op), warp[l].sequence);
  return warp;
}

// ldmatrix rows and cp.async destinations must be 16-byte aligned and inside the dynamic shared memory.
void check_shared(const void* p, size_t bytes, const char* what) {
  const char* c = static_cast<const char*>(p);
  if (reinterpret_cast<uintptr_t>(c) % 16) fail("%s: shared address %p is not 16-byte aligned", what, p);
  if (c < dynamic_smem || c + bytes > dynamic_smem + dynamic_smem_bytes)
    fail("%s: address %p is outside the dynamic shared memory (offset %ld of %zu bytes)", what, p,
         (long)(c - dynamic_smem), dynamic_smem_bytes);
}

uint16_t half_of(uint32_t reg, int high) { return static_cast<uint16_t>(high ? reg >> 16 : reg & 0xffffu); }

double widen(uint16_t bits, bool fp16) { return fp16 ? __half::to_float(bits) : __nv_bfloat16::to_float(bits); }

}  // namespace

namespace detail {
void reset_warp_state(unsigned threads) {
  for (std::vector<Slot>& buffer : slots) buffer.assign(threads, Slot{Op::Shuffle, -1, 0.f, nullptr, {}, {}});
}
}  // namespace detail

float shfl_xor(float value, int lane_mask, unsigned member_mask) {
  if (member_mask != 0xffffffffu) fail("__shfl_xor_sync with a partial member mask %08x", member_mask);
  if (lane_mask < 0 || lane_mask > 31) fail("__shfl_xor_sync with lane mask %d", lane_mask);
  Slot mine{};
  mine.op = Op::Shuffle;
  mine.value = value;
  return exchange(mine)[(current_thread % detail::WARP) ^ lane_mask].value;
}

float shfl_idx(float value, int src_lane, unsigned member_mask) {
  if (member_mask != 0xffffffffu) fail("__shfl_sync with a partial member mask %08x", member_mask);
  Slot mine{};
  mine.op = Op::ShuffleIndexed;
  mine.value = value;
  return exchange(mine)[src_lane & (detail::WARP - 1)].value;  // as the GPU: the lane taken modulo the warp
}

// Four 8x8 matrices of 16-bit values; lane 8i + r gives the address of row r of matrix i. Lane l gets
// register i = matrix i's (row l/4, columns 2(l%4), +1), or transposed (rows 2(l%4), +1, column l/4).
void ldmatrix_x4(uint32_t (&r)[4], const void* row, bool trans) {
  check_shared(row, 16, trans ? "ldmatrix.trans" : "ldmatrix");
  Slot mine{};
  mine.op = trans ? Op::LdmatrixTrans : Op::Ldmatrix;
  mine.row = static_cast<const char*>(row);
  const Slot* warp = exchange(mine);
  const unsigned l = current_thread % detail::WARP;
  for (int i = 0; i < 4; ++i) {
    if (!trans) {
      memcpy(&r[i], warp[i * 8 + l / 4].row + 4 * (l % 4), 4);
    } else {
      uint16_t lo, hi;
      memcpy(&lo, warp[i * 8 + 2 * (l % 4)].row + 2 * (l / 4), 2);
      memcpy(&hi, warp[i * 8 + 2 * (l % 4) + 1].row + 2 * (l / 4), 2);
      r[i] = lo | static_cast<uint32_t>(hi) << 16;
    }
  }
}

// D (16x8, float) += A (16x16) B (16x8), fragments as in cudabench/tensor_core.cuh (lane = 4g + t).
// Products and sums in float64, rounded once to float: at least as accurate as the tensor cores.
void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, bool fp16) {
  Slot mine{};
  mine.op = fp16 ? Op::MmaF16 : Op::MmaBf16;
  memcpy(mine.a, a, sizeof mine.a);
  mine.b[0] = b0;
  mine.b[1] = b1;
  const Slot* warp = exchange(mine);
  auto A = [&](int row, int k) {  // held by lane 4(row%8) + (k%8)/2, register (row >= 8) + 2(k >= 8)
    return widen(half_of(warp[4 * (row % 8) + (k % 8) / 2].a[(row >= 8) + 2 * (k >= 8)], k & 1), fp16);
  };
  auto B = [&](int k, int col) {  // held by lane 4 col + (k%8)/2, register k / 8
    return widen(half_of(warp[4 * col + (k % 8) / 2].b[k / 8], k & 1), fp16);
  };
  const unsigned l = current_thread % detail::WARP, g = l / 4, t = l % 4;
  float out[4];
  for (int i = 0; i < 4; ++i) {
    const int row = g + 8 * (i >> 1), col = 2 * t + (i & 1);
    double sum = d[i];
    for (int k = 0; k < 16; ++k) sum += A(row, k) * B(k, col);
    out[i] = static_cast<float>(sum);
  }
  memcpy(d, out, sizeof out);
}

// The source is read at the issue (so an out-of-bounds read shows there); !valid copies zeros and reads
// nothing, like cp.async's src-size 0.
void cp_async_16(void* dst, const void* src, bool valid) {
  check_shared(dst, 16, "cp.async destination");
  detail::PendingCopy copy{static_cast<char*>(dst), {}, 0};
  if (valid) {
    if (reinterpret_cast<uintptr_t>(src) % 16) fail("cp.async: global source %p is not 16-byte aligned", src);
    memcpy(copy.data, src, 16);
  }
  if (schedule.landing == CpAsyncLanding::AtIssue) {
    memcpy(copy.dst, copy.data, 16);
    return;
  }
  if (schedule.landing == CpAsyncLanding::PoisonUntilWait) memset(copy.dst, 0xff, 16);
  detail::current_fiber().copies.push_back(copy);
}

void cp_async_commit() {
  detail::Fiber& f = detail::current_fiber();
  ++f.committed_groups;
  for (detail::PendingCopy& c : f.copies)
    if (!c.group) c.group = f.committed_groups;
}

// Lands every copy of the committed groups but the newest `pending` ones. Copies are queued in issue
// order, so their groups never decrease and the ones to land are at the front.
void cp_async_wait(int pending) {
  detail::Fiber& f = detail::current_fiber();
  const long newest_landed = f.committed_groups - pending;
  while (!f.copies.empty() && f.copies.front().group && f.copies.front().group <= newest_landed) {
    memcpy(f.copies.front().dst, f.copies.front().data, 16);
    f.copies.pop_front();
  }
}

}  // namespace emu
