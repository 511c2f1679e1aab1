// The running block's fibers: state shared by scheduler.cpp (which runs them) and warp_ops.cpp (whose
// warp-collective operations and cp.async queues live per fiber). Internal to the runtime.
#pragma once
#include <ucontext.h>

#include <deque>
#include <vector>

#include <cuda_runtime.h>

namespace emu::detail {

constexpr unsigned WARP = 32;

// A cp.async copy in flight: its 16 bytes were read at the issue; it lands when its group is waited for.
struct PendingCopy {
  char* dst;
  unsigned char data[16];
  long group;  // 0 until cp_async_commit closes the group it belongs to; groups count from 1
};

// Yield: an mbarrier wait that has not completed; the fiber runs again in the next round of warps.
// GroupBarrier: a warpgroup-collective operation (wgmma), all 128 threads of the warpgroup.
enum class Waiting { No, BlockBarrier, WarpBarrier, Yield, GroupBarrier };

struct Fiber {
  ucontext_t context;
  bool done = false;
  Waiting waiting = Waiting::No;
  long generation = 0;             // the barrier generation it waits to see pass
  long collectives = 0;            // warp-collective operations begun (the next one's sequence number)
  std::deque<PendingCopy> copies;  // oldest first
  long committed_groups = 0;
};

extern std::vector<Fiber> fibers;  // one per thread of the running block
Fiber& current_fiber();
void warp_barrier();                     // suspend until every lane of the current warp has arrived
void group_barrier();                    // suspend until every thread of the current warpgroup has arrived
void yield_round();                      // suspend until the next round of warps (a polling wait)
void polled_through();                   // a polling wait ended: the fiber goes on (progress)
void reset_warp_state(unsigned threads); // at the start of each block
void reset_hopper_state();               // mbarriers and wgmma queues (hopper_ops.cpp), at a block's start
void report_hopper_leftovers();          // wgmma products never waited for, at a block's end

}  // namespace emu::detail
