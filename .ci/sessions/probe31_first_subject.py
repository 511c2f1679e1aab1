"""Why a run's first subject samples longer (session 31): in a fresh process with a CUDA context, time the
clock monitor's steps and the main thread's progress under it, twice. Prints one line per step.

  first/second nvml_device, read_clocks      the NVML calls the monitor makes, first and later
  block N: loop ...                           a 0.25 s loop of tiny synchronised GPU calls under ClockMonitor:
                                              iterations, largest gap between two, when it came, the
                                              poll thread's readings and their longest
  measure N                                   cudabench's measure() of the same call (events, the default
                                              stop rule) under ClockMonitor: its loop's seconds and samples
With --primed the process first does what a subject process's hello does (engine/preload.py); without it,
the first and second summary of 1000 samples are timed first.
"""
import sys
import time

import torch

from cudabench.measure import clocks
from cudabench.measure.clocks import ClockMonitor
from cudabench.device import nvml_device
from cudabench.measure.loop import Warmup, measure
from cudabench.measure.stop import Adaptive
from cudabench.measure.timers import EventTimer

x = torch.zeros(1 << 16, device="cuda")
torch.cuda.synchronize()
if "--primed" in sys.argv:  # what a subject process's hello does since session 31
    from cudabench.engine.preload import prime_statistics, prime_timing
    t = time.perf_counter(); prime_statistics(); a = time.perf_counter() - t
    t = time.perf_counter(); prime_timing(); b = time.perf_counter() - t
    print(f"primed: statistics {a * 1e3:.1f} ms, timing {b * 1e3:.1f} ms", flush=True)
else:
    from cudabench.results.records.stats import summarize
    for label in ("first", "second"):
        t = time.perf_counter(); summarize([float(i) for i in range(1000)])
        print(f"{label} summarize of 1000 samples {(time.perf_counter() - t) * 1e3:.1f} ms", flush=True)
for label in ("first", "second"):
    t = time.perf_counter(); dev = nvml_device(); a = time.perf_counter() - t
    t = time.perf_counter(); clocks.read_clocks(device=dev); b = time.perf_counter() - t
    print(f"{label} nvml_device {a * 1e3:.1f} ms, read_clocks {b * 1e3:.1f} ms", flush=True)

reads: list[float] = []
original = clocks.read_clocks


def timed_read(*args, **kw):
    t = time.perf_counter()
    try:
        return original(*args, **kw)
    finally:
        reads.append(time.perf_counter() - t)


clocks.read_clocks = timed_read


def call():
    return x.add_(1)


for block in (1, 2, 3):
    reads.clear()
    with ClockMonitor():
        start = last = time.perf_counter(); gaps = []
        while time.perf_counter() - start < 0.25:
            torch.cuda._sleep(100); call(); torch.cuda.synchronize()
            now = time.perf_counter(); gaps.append((now - last, now - start)); last = now
    big = max(gaps)
    print(f"block {block}: loop {len(gaps)} iterations, largest gap {big[0] * 1e3:.2f} ms at {big[1] * 1e3:.0f} ms, "
          f"gaps > 1 ms {sum(g > 1e-3 for g, _ in gaps)}; poll readings {len(reads)}, longest "
          f"{max(reads, default=0) * 1e3:.1f} ms", flush=True)

for n in (1, 2, 3):
    reads.clear()
    with ClockMonitor() as monitor:
        t = time.perf_counter()
        m = measure(call, EventTimer(), Adaptive(), Warmup(), torch.cuda.synchronize, None, "hot", monitor.mark)
        loop = time.perf_counter() - t - m.warmup_seconds
    print(f"measure {n}: loop {loop * 1e3:.1f} ms, {len(m.samples)} samples, warm-up {m.warmup_seconds * 1e3:.1f} ms, "
          f"poll readings {len(reads)}, longest {max(reads, default=0) * 1e3:.1f} ms; {m.stop_reason}", flush=True)
