// Hopper's asynchronous machinery on the emulator (shim/cudabench/hopper.cuh): mbarriers, TMA tile copies
// with the 128-byte swizzle, and wgmma from shared-memory descriptors or registers.
//
// The swizzle is a function of the shared address: in each 1024-byte block, 16-byte chunk c of 128-byte row
// r is stored at chunk c ^ r. TMA applies it when it writes a box, wgmma when it reads through a
// descriptor; the dynamic shared memory is 1024-byte aligned here, so offsets carry the address bits.
// Descriptor layouts (the PTX ISA's canonical 128 B-swizzled ones), for element (row or k, column):
//   K-major  (rows of 64 16-bit k values): start + (row / 8) * SBO + (row % 8) * 128 + k * 2;
//   MN-major (rows of 64 m or n values, one per k): start + (mn / 64) * LBO + (k / 8) * SBO + (k % 8) * 128
//            + (mn % 64) * 2.
#include <deque>
#include <map>
#include <vector>

#include "fibers.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudaTypedefs.h>
#include <cudabench/hopper.cuh>  // the declarations this file defines

namespace emu {

namespace {

constexpr unsigned GROUP = 128;

struct Landing {  // a TMA box not yet visible: where each element goes, its bytes, and the phase it is part of
  std::vector<std::pair<char*, size_t>> to;
  std::vector<char> bytes;
  long phase;
};
struct Mbarrier {
  uint32_t count = 0, pending = 0;
  long long tx = 0;           // bytes announced and not yet delivered (negative: delivered first)
  long completed = 0;         // phases completed
  std::vector<Landing> held;  // boxes that land when a wait sees their phase complete
};
std::map<const void*, Mbarrier> barriers;

struct WgmmaOp {
  long sequence, group;  // the issuing threads' count of wgmma calls and of commits before it
  int n;
  uint64_t desc_a, desc_b;
  bool registers_a, trans_b, accumulate, f16, trans_a;  // f16: the inputs are float16, else bfloat16
  std::vector<float*> d;             // each thread's accumulators
  std::vector<const uint32_t*> a;    // each thread's A fragment (registers_a)
};
struct Warpgroup {
  std::deque<WgmmaOp> ops;           // issued, not yet landed
  std::vector<long> issued, commits; // per thread
};
std::vector<Warpgroup> warpgroups;

struct NamedBarrier {  // bar.sync / bar.arrive with an id and a thread count
  unsigned count = 0, arrived = 0;
  long generation = 0;
};
std::map<int, NamedBarrier> named_barriers;

void check_in_shared(const void* p, size_t bytes, size_t alignment, const char* what) {
  const char* c = static_cast<const char*>(p);
  if (c < dynamic_smem || c + bytes > dynamic_smem + dynamic_smem_bytes)
    fail("%s: address %p is outside the dynamic shared memory", what, p);
  if ((c - dynamic_smem) % alignment) fail("%s: shared offset %ld is not %zu-byte aligned", what, (long)(c - dynamic_smem), alignment);
}

Mbarrier& barrier_at(uint64_t* bar, const char* what) {
  check_in_shared(bar, 8, 8, what);
  const auto it = barriers.find(bar);
  if (it == barriers.end()) fail("%s on an mbarrier never initialised", what);
  return it->second;
}

void write(const Landing& l) {
  for (size_t i = 0, at = 0; i < l.to.size(); at += l.to[i].second, ++i) memcpy(l.to[i].first, &l.bytes[at], l.to[i].second);
}

void complete_if_done(Mbarrier& b) {
  if (b.pending == 0 && b.tx == 0) {
    ++b.completed;
    b.pending = b.count;
  }
}

size_t swizzled(size_t offset) { return offset ^ (((offset >> 7) & 7) << 4); }

float half_bits(uint16_t bits, bool f16) { return f16 ? __half::to_float(bits) : __nv_bfloat16::to_float(bits); }

float shared_half(size_t offset, bool f16, const char* what) {
  if (offset + 2 > dynamic_smem_bytes) fail("%s reads shared offset %zu past its %zu bytes", what, offset, dynamic_smem_bytes);
  uint16_t bits;
  memcpy(&bits, dynamic_smem + offset, 2);
  return half_bits(bits, f16);
}

// element (row, k) of a K-major operand, or (k, mn) of an MN-major one, through a descriptor
float operand(uint64_t desc, bool mn_major, int row_or_k, int k_or_mn, bool f16) {
  if ((desc >> 62) != 1) fail("wgmma descriptor %016llx: only the 128-byte swizzle is emulated", (unsigned long long)desc);
  const size_t start = (desc & 0x3FFF) << 4, lbo = ((desc >> 16) & 0x3FFF) << 4, sbo = ((desc >> 32) & 0x3FFF) << 4;
  size_t offset;
  if (!mn_major) {
    const int row = row_or_k, k = k_or_mn;
    offset = start + (row / 8) * sbo + (row % 8) * 128 + k * 2;
  } else {
    const int k = row_or_k, mn = k_or_mn;
    offset = start + (mn / 64) * lbo + (k / 8) * sbo + (k % 8) * 128 + (mn % 64) * 2;
  }
  return shared_half(swizzled(offset), f16, "wgmma");
}

float register_half(uint32_t reg, int high, bool f16) {
  return half_bits(static_cast<uint16_t>(high ? reg >> 16 : reg & 0xffffu), f16);
}

// D (64 × n) = A (64 × 16) · B (16 × n) [+ D], into each thread's accumulators in the m64nNk16 layout
void land(const WgmmaOp& op) {
  float a[64][16];
  for (int m = 0; m < 64; ++m)
    for (int k = 0; k < 16; ++k) {
      if (!op.registers_a) {
        a[m][k] = op.trans_a ? operand(op.desc_a, true, k, m, op.f16) : operand(op.desc_a, false, m, k, op.f16);
        continue;
      }
      // the m16n8k16 A fragment of warp m / 16: a0 (g, 2q..), a1 (g + 8, 2q..), a2 (g, 2q + 8..), a3 (g + 8, 2q + 8..)
      const int w = m / 16, g = m % 8, q = (k % 8) / 2, reg = (m % 16 >= 8) + 2 * (k >= 8);
      a[m][k] = register_half(op.a[w * 32 + g * 4 + q][reg], k % 2, op.f16);
    }
  std::vector<float> b(16 * op.n);
  for (int k = 0; k < 16; ++k)
    for (int c = 0; c < op.n; ++c) b[k * op.n + c] = op.trans_b ? operand(op.desc_b, true, k, c, op.f16) : operand(op.desc_b, false, c, k, op.f16);
  for (unsigned t = 0; t < GROUP; ++t) {
    const int w = t / 32, lane = t % 32, g = lane / 4, q = lane % 4;
    for (int i = 0; i < op.n / 2; ++i) {
      const int j = i / 4, r = i % 4, row = 16 * w + g + 8 * (r >= 2), col = 8 * j + 2 * q + (r & 1);
      double sum = 0;
      for (int k = 0; k < 16; ++k) sum += double(a[row][k]) * b[k * op.n + col];
      op.d[t][i] = op.accumulate ? op.d[t][i] + float(sum) : float(sum);
    }
  }
}

Warpgroup& my_warpgroup() {
  const unsigned g = current_thread / GROUP;
  if (detail::fibers.size() % GROUP) fail("wgmma in a block of %zu threads (not whole warpgroups)", detail::fibers.size());
  if (warpgroups.size() <= g) warpgroups.resize(detail::fibers.size() / GROUP);
  Warpgroup& wg = warpgroups[g];
  if (wg.issued.empty()) wg.issued.assign(GROUP, 0), wg.commits.assign(GROUP, 0);
  return wg;
}

// every thread of the warpgroup is here; then one of them does `work` while the others wait for it
template <typename Work>
void collectively(Work work) {
  detail::group_barrier();
  if (current_thread % GROUP == 0) work();
  detail::group_barrier();
}

}  // namespace

namespace detail {
void reset_hopper_state() {
  barriers.clear();
  warpgroups.clear();
  named_barriers.clear();
}
void report_hopper_leftovers() {
  size_t left = 0, arrivals = 0;
  for (const auto& [id, b] : named_barriers) arrivals += b.arrived;
  if (arrivals)
    fprintf(stderr, "note: block (%u,%u,%u) ended with %zu arrivals on named barriers not completed\n", block_index.x,
            block_index.y, block_index.z, arrivals);
  for (const Warpgroup& wg : warpgroups) left += wg.ops.size();
  if (left) fprintf(stderr, "note: block (%u,%u,%u) ended with %zu wgmma products never waited for\n", block_index.x,
                    block_index.y, block_index.z, left);
}
}  // namespace detail

uint32_t shared_offset(const void* p) {
  check_in_shared(p, 1, 1, "a shared address");
  return static_cast<uint32_t>(static_cast<const char*>(p) - dynamic_smem);
}

void mbar_init(uint64_t* bar, uint32_t arrivals) {
  check_in_shared(bar, 8, 8, "mbarrier.init");
  if (!arrivals) fail("mbarrier.init with no arrivals");
  barriers[bar] = Mbarrier{arrivals, arrivals, 0, 0, {}};
}

void mbar_arrive(uint64_t* bar, uint32_t tx_bytes) {
  Mbarrier& b = barrier_at(bar, "mbarrier.arrive");
  if (!b.pending) fail("mbarrier.arrive on a phase with no arrivals left");
  b.tx += tx_bytes;
  --b.pending;
  complete_if_done(b);
  // a plain arrival (a consumer freeing a buffer) lets every other warp run first: a buffer freed too early
  // is refilled (and, with TMA landing at its phase, poisoned) before this thread's next step, as a fast
  // producer would do it
  if (tx_bytes == 0) {
    detail::yield_round();
    detail::polled_through();
  }
}

bool mbar_done(uint64_t* bar, uint32_t parity) { return (barrier_at(bar, "mbarrier.try_wait").completed & 1) != (long)(parity & 1); }

void mbar_wait(uint64_t* bar, uint32_t parity) {
  while (!mbar_done(bar, parity)) detail::yield_round();
  detail::polled_through();
  // the boxes of the phases this wait has seen complete become visible now, and not before: a thread that
  // reads a TMA destination without such a wait reads the poison
  Mbarrier& b = barrier_at(bar, "mbarrier.try_wait");
  std::vector<Landing> later;
  for (Landing& l : b.held) {
    if (l.phase < b.completed) write(l);
    else later.push_back(std::move(l));
  }
  b.held.swap(later);
}

long named_barrier_arrive(int id, unsigned count) {
  if (id < 1 || id > 15) fail("named barrier %d: ids 1..15 (0 is __syncthreads')", id);
  if (count == 0 || count % 32 || count > detail::fibers.size())
    fail("named barrier %d: %u threads (whole warps of the block)", id, count);
  NamedBarrier& b = named_barriers[id];
  if (b.arrived && b.count != count) fail("named barrier %d: %u threads, then %u", id, b.count, count);
  b.count = count;
  const long generation = b.generation;
  if (++b.arrived == count) {
    b.arrived = 0;
    ++b.generation;
  }
  return generation;
}

void named_barrier_sync(int id, unsigned count) {
  const long generation = named_barrier_arrive(id, count);
  while (named_barriers[id].generation == generation) detail::yield_round();
  detail::polled_through();
}

void tma_load(void* dst, const CUtensorMap* map, uint64_t* bar, const int* coords, int rank) {
  if ((int)map->rank != rank) fail("a %d-D TMA load through a %u-D tensor map", rank, map->rank);
  const size_t row_bytes = size_t(map->box[0]) * map->element_bytes;
  size_t elements = 1;
  for (int i = 0; i < rank; ++i) elements *= map->box[i];
  const size_t bytes = elements * map->element_bytes;
  const bool swizzle = map->swizzle == CU_TENSOR_MAP_SWIZZLE_128B;
  check_in_shared(dst, bytes, swizzle ? 1024 : 128, "cp.async.bulk.tensor destination");
  if (swizzle && row_bytes != 128) fail("TMA with the 128-byte swizzle and %zu-byte box rows (emulated: 128)", row_bytes);
  const size_t base = static_cast<char*>(dst) - dynamic_smem;
  Mbarrier& b = barrier_at(bar, "cp.async.bulk.tensor's mbarrier");
  Landing landing;
  landing.bytes.resize(bytes);
  landing.phase = b.completed;
  for (size_t e = 0; e < elements; ++e) {
    size_t rest = e, source = 0;
    bool inside = true;
    for (int i = 0; i < rank; ++i) {
      const long long x = coords[i] + (long long)(rest % map->box[i]);
      rest /= map->box[i];
      inside &= x >= 0 && (unsigned long long)x < map->dims[i];
      source += size_t(x) * map->strides[i];
    }
    const size_t offset = base + e * map->element_bytes;
    char* to = dynamic_smem + (swizzle ? swizzled(offset) : offset);
    char* data = &landing.bytes[e * map->element_bytes];
    if (inside) memcpy(data, map->base + source, map->element_bytes);
    else memset(data, 0, map->element_bytes);  // out of the tensor: zeros (FLOAT_OOB_FILL_NONE)
    landing.to.emplace_back(to, map->element_bytes);
    memset(to, 0xff, map->element_bytes);  // until it lands: a read before its mbarrier's phase sees NaN
  }
  if (schedule.tma == TmaLanding::AtIssue) write(landing);
  else b.held.push_back(std::move(landing));
  b.tx -= (long long)bytes;
  complete_if_done(b);
}

void wgmma(float* d, int n, uint64_t desc_a, const uint32_t* a_regs, uint64_t desc_b, bool trans_b, bool accumulate,
           bool f16, bool trans_a) {
  Warpgroup& wg = my_warpgroup();
  const unsigned t = current_thread % GROUP;
  const long sequence = wg.issued[t]++;
  WgmmaOp* op = nullptr;
  for (WgmmaOp& o : wg.ops)
    if (o.sequence == sequence) op = &o;
  if (!op) {
    wg.ops.push_back(WgmmaOp{sequence, wg.commits[t], n, desc_a, desc_b, a_regs != nullptr, trans_b, accumulate, f16,
                             trans_a, std::vector<float*>(GROUP), std::vector<const uint32_t*>(GROUP)});
    op = &wg.ops.back();
  }
  if (op->group != wg.commits[t] || op->n != n || op->desc_a != desc_a || op->desc_b != desc_b ||
      op->registers_a != (a_regs != nullptr) || op->trans_b != trans_b || op->accumulate != accumulate ||
      op->f16 != f16 || op->trans_a != trans_a)
    fail("divergent wgmma #%ld: thread %u of the warpgroup gives other operands than another", sequence, t);
  op->d[t] = d;
  op->a[t] = a_regs;
  if (schedule.wgmma == WgmmaLanding::AtIssue)
    collectively([&] {
      for (WgmmaOp& o : wg.ops) land(o);
      wg.ops.clear();
    });
  else
    detail::group_barrier();  // every thread's operands are recorded before any of them goes on
}

void wgmma_commit() { ++my_warpgroup().commits[current_thread % GROUP]; }

void wgmma_wait(int pending) {
  Warpgroup& wg = my_warpgroup();
  const long covered = wg.commits[current_thread % GROUP] - pending;  // groups before this one have landed
  collectively([&] {
    while (!wg.ops.empty() && wg.ops.front().group < covered) {
      land(wg.ops.front());
      wg.ops.pop_front();
    }
  });
}

namespace {
CUresult encode_tiled(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* base, const cuuint64_t* dims,
                      const cuuint64_t* strides, const cuuint32_t* box, const cuuint32_t* steps, CUtensorMapInterleave,
                      CUtensorMapSwizzle swizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill) {
  if (rank < 1 || rank > 5 || reinterpret_cast<uintptr_t>(base) % 16) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 && type != CU_TENSOR_MAP_DATA_TYPE_FLOAT16) return CUDA_ERROR_INVALID_VALUE;
  *map = CUtensorMap{};
  map->base = static_cast<const char*>(base);
  map->rank = rank;
  map->element_bytes = 2;
  map->swizzle = swizzle;
  map->strides[0] = 2;
  for (cuuint32_t i = 0; i < rank; ++i) {
    if (!box[i] || box[i] > 256 || steps[i] != 1) return CUDA_ERROR_INVALID_VALUE;
    map->dims[i] = dims[i];
    map->box[i] = box[i];
    if (i) {
      if (strides[i - 1] % 16) return CUDA_ERROR_INVALID_VALUE;
      map->strides[i] = strides[i - 1];
    }
  }
  return CUDA_SUCCESS;
}
}  // namespace

void* driver_entry_point(const char* symbol) {
  return strcmp(symbol, "cuTensorMapEncodeTiled") == 0 ? reinterpret_cast<void*>(&encode_tiled) : nullptr;
}

}  // namespace emu
