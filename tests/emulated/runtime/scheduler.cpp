// The emulator's scheduler: runs a block's CUDA threads as cooperative fibers (ucontext), one at a time,
// switching only at __syncthreads, at warp-collective operations and at a thread's end. Because nothing
// runs concurrently the results are deterministic for a given schedule; a race in the kernel shows up as
// a difference between two schedules (or as NaN read from shared memory that nobody wrote: it starts as
// 0xff bytes).
#include <algorithm>
#include <cstdarg>
#include <map>
#include <memory>

#include "fibers.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define EMU_UNPOISON_STACK(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define EMU_UNPOISON_STACK(p, n) ((void)0)
#endif

namespace emu {

Schedule schedule;
unsigned current_thread = 0;
uint3 block_index;
dim3 grid_size, block_size;
char* dynamic_smem = nullptr;
size_t dynamic_smem_bytes = 0;
cudaError_t last_error = cudaSuccess;

void fail(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  fflush(stdout);
  fprintf(stderr, "EMULATOR CHECK FAILED (block %u,%u,%u thread %u): ", block_index.x, block_index.y, block_index.z,
          current_thread);
  vfprintf(stderr, fmt, args);
  fprintf(stderr, "\n");
  va_end(args);
  abort();
}

uint3 thread_index() {
  const unsigned t = current_thread, x = block_size.x, y = block_size.y;
  return uint3{t % x, t / x % y, t / (x * y)};
}

namespace {

constexpr size_t STACK_BYTES = 256 * 1024;  // a kernel's locals are a few KB; sanitizers need more
constexpr int DEFAULT_SMEM_LIMIT = 48 * 1024;
constexpr int OPTIN_SMEM_LIMIT = 227 * 1024;  // sm_90

std::map<const void*, int> smem_limits;  // set by cudaFuncSetAttribute
std::vector<std::unique_ptr<char[]>> stacks;  // reused from block to block
ucontext_t scheduler_context;
const std::function<void()>* block_body = nullptr;
long barrier_generation = 0;
unsigned at_barrier = 0;  // threads waiting in the current generation
std::vector<long> warp_generation;
std::vector<unsigned> at_warp_barrier;
std::vector<long> group_generation;  // warpgroups (128 threads): wgmma's exchanges
std::vector<unsigned> at_group_barrier;
long current_round = 0;
long last_progress_round = 0;            // the last round in which a fiber did more than poll
// Rounds of nothing but polling waits whose conditions stayed false: a deadlock. Only a fiber that goes on
// changes what a polling wait reads (an arrival, a barrier's generation, a box landing), so one such round
// is followed by another like it; two, for good measure. (Counting only resumptions from other waits as
// progress took 100,000 rounds here: a planted deadlock took over two minutes to report.)
constexpr long POLLING_ROUNDS_LIMIT = 2;
constexpr unsigned GROUP = 128;

void fiber_main() {
  (*block_body)();
  detail::current_fiber().done = true;
  swapcontext(&detail::current_fiber().context, &scheduler_context);
}

void suspend(detail::Waiting why, long generation) {
  detail::Fiber& f = detail::current_fiber();
  f.waiting = why;
  f.generation = generation;
  swapcontext(&f.context, &scheduler_context);
}

bool runnable(unsigned t) {
  const detail::Fiber& f = detail::fibers[t];
  if (f.done) return false;
  if (f.waiting == detail::Waiting::BlockBarrier) return barrier_generation > f.generation;
  if (f.waiting == detail::Waiting::WarpBarrier) return warp_generation[t / detail::WARP] > f.generation;
  if (f.waiting == detail::Waiting::GroupBarrier) return group_generation[t / GROUP] > f.generation;
  if (f.waiting == detail::Waiting::Yield) return current_round > f.generation;
  return true;
}

void resume(unsigned t) {
  if (detail::fibers[t].waiting != detail::Waiting::Yield) last_progress_round = current_round;
  detail::fibers[t].waiting = detail::Waiting::No;
  current_thread = t;
  swapcontext(&scheduler_context, &detail::fibers[t].context);
}

// Runs warp w's lanes (in lane order, or reversed) until none can go on: all wait at __syncthreads or
// are done. A lane at a warp collective goes on once its last lane arrives, within this same call.
bool run_warp(unsigned w, bool reverse) {
  const unsigned first = w * detail::WARP, lanes = std::min(detail::WARP, (unsigned)detail::fibers.size() - first);
  bool ran = false;
  for (bool again = true; again;) {
    again = false;
    for (unsigned i = 0; i < lanes; ++i) {
      const unsigned t = first + (reverse ? lanes - 1 - i : i);
      if (!runnable(t)) continue;
      resume(t);
      ran = again = true;
    }
  }
  return ran;
}

void create_fibers(unsigned threads) {
  detail::fibers.clear();
  detail::fibers.resize(threads);
  while (stacks.size() < threads) stacks.emplace_back(new char[STACK_BYTES]);
  for (unsigned t = 0; t < threads; ++t) {
    ucontext_t& c = detail::fibers[t].context;
    EMU_UNPOISON_STACK(stacks[t].get(), STACK_BYTES);  // a reused stack may hold a dead fiber's redzones
    getcontext(&c);
    c.uc_stack.ss_sp = stacks[t].get();
    c.uc_stack.ss_size = STACK_BYTES;
    c.uc_link = nullptr;
    makecontext(&c, fiber_main, 0);
  }
}

void report_deadlock() {
  unsigned done = 0, at_block = 0, at_warp = 0, at_group = 0, polling = 0;
  for (const detail::Fiber& f : detail::fibers) {
    done += f.done;
    at_block += !f.done && f.waiting == detail::Waiting::BlockBarrier;
    at_warp += !f.done && f.waiting == detail::Waiting::WarpBarrier;
    polling += !f.done && f.waiting == detail::Waiting::Yield;
    at_group += !f.done && f.waiting == detail::Waiting::GroupBarrier;
  }
  fprintf(stderr, "DEADLOCK in block (%u,%u,%u): %u threads done, %u at __syncthreads, %u at a warp collective, "
          "%u at a warpgroup collective, %u waiting on an mbarrier\n",
          block_index.x, block_index.y, block_index.z, done, at_block, at_warp, at_group, polling);
  last_error = cudaErrorLaunchFailure;
}

// Rounds of warps: each warp runs as far as it can, then the next one. Every round goes forward or in
// reverse, so that a missing barrier between one warp's write and another's read changes the outcome.
void run_fibers() {
  const unsigned warps = (unsigned)(detail::fibers.size() + detail::WARP - 1) / detail::WARP;
  current_round = last_progress_round = 0;
  for (long round = 0;; ++round) {
    current_round = round;
    const bool reverse = schedule.order == WarpOrder::Reverse || (schedule.order == WarpOrder::Alternate && round % 2);
    bool ran = false;
    for (unsigned i = 0; i < warps; ++i) ran |= run_warp(reverse ? warps - 1 - i : i, reverse);
    bool all_done = true;
    for (const detail::Fiber& f : detail::fibers) all_done &= f.done;
    if (all_done) return;
    if (!ran || round - last_progress_round > POLLING_ROUNDS_LIMIT) return report_deadlock();
  }
}

void report_unwaited_copies() {
  size_t pending = 0;
  for (const detail::Fiber& f : detail::fibers) pending += f.copies.size();
  if (pending)
    fprintf(stderr, "note: block (%u,%u,%u) ended with %zu cp.async copies never waited for\n", block_index.x,
            block_index.y, block_index.z, pending);
}

}  // namespace

namespace detail {

std::vector<Fiber> fibers;

Fiber& current_fiber() { return fibers[current_thread]; }

void warp_barrier() {
  const unsigned w = current_thread / WARP;
  const long generation = warp_generation[w];
  if (++at_warp_barrier[w] == WARP) {
    at_warp_barrier[w] = 0;
    ++warp_generation[w];
  }
  suspend(Waiting::WarpBarrier, generation);
}

void group_barrier() {
  const unsigned g = current_thread / GROUP;
  const long generation = group_generation[g];
  if (++at_group_barrier[g] == std::min<size_t>(GROUP, fibers.size() - g * GROUP)) {
    at_group_barrier[g] = 0;
    ++group_generation[g];
  }
  suspend(Waiting::GroupBarrier, generation);
}

void yield_round() { suspend(Waiting::Yield, current_round); }

void polled_through() { last_progress_round = current_round; }

}  // namespace detail

void block_barrier() {
  const long generation = barrier_generation;
  if (++at_barrier == detail::fibers.size()) {
    at_barrier = 0;
    ++barrier_generation;
  }
  suspend(detail::Waiting::BlockBarrier, generation);
}

void set_max_dynamic_smem(const void* kernel, int bytes) { smem_limits[kernel] = bytes; }

bool launch_allowed(const void* kernel, dim3 grid, dim3 block, size_t smem) {
  const auto it = smem_limits.find(kernel);
  const int limit = it == smem_limits.end() ? DEFAULT_SMEM_LIMIT : it->second;
  const unsigned long threads = (unsigned long)block.x * block.y * block.z;
  const char* why = smem > (size_t)limit || smem > (size_t)OPTIN_SMEM_LIMIT ? "too much dynamic shared memory"
                    : !grid.x || !grid.y || !grid.z || grid.y > 65535 || grid.z > 65535 ? "bad grid"
                    : !threads || threads > 1024 || block.z > 64 ? "bad block"
                                                                   : nullptr;
  if (!why) return true;
  fprintf(stderr, "launch refused (%s): grid (%u,%u,%u) block (%u,%u,%u) smem %zu (limit %d)\n", why, grid.x, grid.y,
          grid.z, block.x, block.y, block.z, smem, limit);
  last_error = cudaErrorInvalidValue;
  return false;
}

void run_block(const std::function<void()>& body, uint3 index, unsigned threads, size_t smem) {
  block_index = index;
  block_body = &body;
  barrier_generation = 0;
  at_barrier = 0;
  warp_generation.assign((threads + detail::WARP - 1) / detail::WARP, 0);
  at_warp_barrier.assign(warp_generation.size(), 0);
  group_generation.assign((threads + GROUP - 1) / GROUP, 0);
  at_group_barrier.assign(group_generation.size(), 0);
  detail::reset_warp_state(threads);
  detail::reset_hopper_state();
  // 1024-byte aligned, so that an offset into it has the address bits the 128-byte swizzle of TMA and
  // wgmma works on (the real base is aligned at least that much); 0xff bytes are NaN as float, bf16 and
  // fp16, so unwritten shared memory that reaches an output shows.
  const size_t bytes = (smem / 1024 + 1) * 1024;  // aligned_alloc takes a multiple of the alignment
  std::unique_ptr<char, decltype(&free)> smem_block(static_cast<char*>(aligned_alloc(1024, bytes)), free);
  memset(smem_block.get(), 0xff, smem);
  dynamic_smem = smem_block.get();
  dynamic_smem_bytes = smem;
  create_fibers(threads);
  run_fibers();
  report_unwaited_copies();
  detail::report_hopper_leftovers();
  detail::fibers.clear();
  dynamic_smem = nullptr;
  dynamic_smem_bytes = 0;
}

}  // namespace emu
