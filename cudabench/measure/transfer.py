"""Host-to-device copies timed the right way and the way people get wrong, and what overlapping a
copy with a kernel saves (`cudabench compare-transfer`). Runs inside a worker.

Methods, per size, source (pageable or pinned host memory) and `non_blocking`:
- "events": CUDA events recorded on the copy's stream around it, the end event waited for: the
  copy's time on the GPU's timeline. Valid.
- "host clock, synchronized": synchronize, clock, copy, synchronize, clock: the wall time of the
  copy from an idle GPU to done. Valid.
- "host clock only": clock, copy, clock, no synchronize: valid only when the call itself waits
  for the copy (non_blocking=False). A non-blocking copy from pinned memory returns as soon as it
  is queued, and one from pageable memory once its last chunk is staged, so the clock stops before
  the data has arrived."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable

METHODS = ("events", "host clock, synchronized", "host clock only")


@dataclass(frozen=True)
class CopyResult:
    size: int              # bytes copied
    pinned: bool
    non_blocking: bool
    method: str            # one of METHODS
    valid: bool
    samples: tuple[float, ...]  # seconds per copy

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def gbps(self) -> float:
        return self.size / self.median / 1e9 if self.median > 0 else float("inf")


def is_valid(method: str, non_blocking: bool) -> bool:
    return method != "host clock only" or not non_blocking


def time_copies(sizes: list[int], iterations: int) -> list[CopyResult]:
    """Every size × source × non_blocking × method, `iterations` copies each after one warm-up copy."""
    import torch

    results = []
    for size in sizes:  # each size's buffers replace the last's
        device = torch.empty(size, dtype=torch.uint8, device="cuda")
        for pinned in (False, True):
            host = torch.empty(size, dtype=torch.uint8, pin_memory=pinned).fill_(1)
            for non_blocking in (False, True):
                def copy() -> None:
                    device.copy_(host, non_blocking=non_blocking)

                copy()
                torch.cuda.synchronize()
                for method in METHODS:
                    samples = tuple(_timed(copy, method) for _ in range(iterations))
                    results.append(CopyResult(size, pinned, non_blocking, method, is_valid(method, non_blocking),
                                              samples))
    return results


def _timed(copy: Callable[[], None], method: str) -> float:
    import torch

    if method == "events":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        copy()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3
    if method == "host clock, synchronized":
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        copy()
        torch.cuda.synchronize()
        return time.perf_counter() - t0
    torch.cuda.synchronize()  # each sample starts from an idle GPU; only the clock is left unsynchronised
    t0 = time.perf_counter()
    copy()
    elapsed = time.perf_counter() - t0
    torch.cuda.synchronize()
    return elapsed


@dataclass(frozen=True)
class Overlap:
    size: int                 # bytes of the next batch copied
    copy: float               # seconds: the copy alone (pinned, events)
    kernel: float             # seconds: the kernel alone (events)
    kernel_name: str
    sequential: tuple[float, ...]   # seconds, wall: copy then kernel on one stream
    overlapped: tuple[float, ...]   # seconds, wall: copy on a second stream while the kernel runs


def overlap(size: int, iterations: int) -> Overlap:
    """A copy of the next batch (pinned, non-blocking) and a kernel (float32 matmuls, repeated to last
    about as long as the copy): one after the other on one stream, then the copy on a second stream
    while the kernel runs on the first. Wall time from synchronized host clocks."""
    import torch

    from cudabench.measure.ceilings import median_event_seconds

    host = torch.empty(size, dtype=torch.uint8, pin_memory=True).fill_(1)
    device = torch.empty(size, dtype=torch.uint8, device="cuda")
    a = torch.rand(2048, 2048, device="cuda")

    def copy() -> None:
        device.copy_(host, non_blocking=True)

    one_matmul = median_event_seconds(lambda: torch.mm(a, a), 5)
    copy_time = median_event_seconds(copy, 5)
    repeats = max(1, round(copy_time / max(one_matmul, 1e-6)))

    def kernel() -> None:
        for _ in range(repeats):
            torch.mm(a, a)

    kernel_time = median_event_seconds(kernel, 5)
    side = torch.cuda.Stream()

    def sequential() -> None:
        copy()
        kernel()

    def overlapped() -> None:
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            copy()
        kernel()
        torch.cuda.current_stream().wait_stream(side)

    return Overlap(size, copy_time, kernel_time, f"{repeats}× float32 matmul 2048²",
                   tuple(_wall(sequential) for _ in range(iterations)),
                   tuple(_wall(overlapped) for _ in range(iterations)))


def _wall(fn: Callable[[], None]) -> float:
    import torch

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


EXPLANATION = """How to read this. A host-to-device copy from pinned (page-locked) memory is one DMA transfer;
from pageable memory the driver first copies through a pinned staging buffer, in chunks, on the CPU.
• events and "host clock, synchronized" are measurements: the copy is known to have finished when the
  clock stops. Events give its time on the GPU's timeline; the synchronized host clock adds the
  launch and synchronize round trip (µs), which only matters for small copies.
• "host clock only" around a non-blocking copy is NOT a measurement: from pinned memory the call
  returns once the copy is queued, so the figure is the cost of queueing it and its GB/s can exceed
  the link's; from pageable memory it returns once the last chunk is staged, before it has arrived.
  With non_blocking=False the call waits for the copy, so the same clock happens to be right.
• % of link: against the fastest valid figure of this run (pinned, largest size), the link's measured
  peak. Pageable copies pay for the staging copy and reach a fraction of it.
• Overlap: a copy from pinned memory with non_blocking=True on a second stream runs beside a kernel on
  the first (the GPU's copy engines are separate from its SMs); the wall time is then close to the
  longer of the two instead of their sum. From pageable memory, or on the kernel's own stream, the two
  would run one after the other."""
