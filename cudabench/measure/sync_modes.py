"""The four synchronize placements of the classic timing tutorial, reproduced for demonstration.

Only "both" is a measurement. The others time something else (the launch call alone, or a queue
left by earlier work) and are shown side by side with correct timers so the difference can be
seen on your own GPU."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

Call = Callable[[], Any]


@dataclass(frozen=True)
class Placement:
    name: str
    sync_before: bool
    sync_after: bool
    valid: bool
    contains: str


PLACEMENTS = (
    Placement("both", True, True, True,
              "launch + GPU work + synchronize latency: the call, from an idle GPU to done"),
    Placement("before", True, False, False,
              "the launch call only: the clock stops while the kernel is still queued or running"),
    Placement("after", False, True, False,
              "1st iteration: the queue left by the warm-up (and earlier work) + the call; "
              "later ones: the call"),
    Placement("none", False, False, False,
              "the launch call only; once the launch queue is full, waits for a free slot"),
)


def time_placement(call: Call, placement: Placement, iterations: int, warmup: int,
                   sync: Callable[[], None], clock: Callable[[], float] = time.perf_counter,
                   busy: Optional[Callable[[], None]] = None) -> list[float]:
    """Seconds per iteration, exactly as the tutorial: `warmup` unsynchronised calls (queued behind
    `busy`, earlier GPU work, if given), then `iterations` timed calls with the placement's
    synchronize calls. Leaves the GPU idle afterwards."""
    if busy is not None:
        busy()
    for _ in range(warmup):
        call()
    times = []
    for _ in range(iterations):
        if placement.sync_before:
            sync()
        start = clock()
        call()
        if placement.sync_after:
            sync()
        times.append(clock() - start)
    sync()
    return times


@dataclass(frozen=True)
class ModeResult:
    name: str
    samples: tuple[float, ...]
    valid: bool
    contains: str

    @property
    def first(self) -> float:
        return self.samples[0]

    @property
    def rest_median(self) -> float:
        rest = sorted(self.samples[1:] or self.samples)
        return rest[len(rest) // 2]


EXPLANATION = """\
How to read this. A CUDA launch returns to Python as soon as the kernel is queued; the GPU runs it
later. A host clock therefore measures the GPU only if the queue is empty when the clock starts
(synchronize before) and the work is finished when it stops (synchronize after).
• before only / none stop the clock when the launch call returns, so they report what a launch
  costs on the CPU, not what the kernel costs on the GPU: for a short kernel they can even look
  longer than it (launch overhead), for a long one far shorter.
• after only starts the clock while the warm-up's (and any earlier) work may still be queued: its
  first iteration pays for all of it. After that it matches "both", because each iteration's final
  synchronize empties the queue for the next.
• both is correct but includes the launch and the synchronize round trip (several µs): for a
  kernel of a few µs that is most of the figure. CUDA events (launch hidden) and CUDA-graph replay
  measure GPU time; CUPTI reports the kernels' own durations — the ground truth for kernel time.
"""


def compare(call: Call, iterations: int, warmup: int, busy_ms: float) -> list[ModeResult]:
    """Time an already checked call under every placement and every correct timer (in a worker)."""
    import torch

    from cudabench.measure.loop import Warmup, measure
    from cudabench.measure.stop import FixedCount
    from cudabench.measure.timers import CuptiTimer, EventTimer, GraphTimer, sleep_cycles

    sync = torch.cuda.synchronize
    busy = (lambda: torch.cuda._sleep(sleep_cycles(busy_ms / 1e3))) if busy_ms > 0 else None
    results = []
    for p in PLACEMENTS:
        samples = time_placement(call, p, iterations, warmup, sync, busy=busy)
        results.append(ModeResult(f"sync {p.name}", tuple(samples), p.valid, p.contains))
    correct = [
        (EventTimer(), "GPU time from CUDA events around the call (launch hidden behind a GPU sleep)"),
        (GraphTimer(), "GPU time per call from replaying a CUDA graph of many calls (no launch cost; "
                       "graph node gaps remain)"),
        (CuptiTimer(), "the kernels' own durations, recorded by CUPTI: kernel time, the ground truth"),
    ]
    for timer, contains in correct:
        m = measure(call, timer, FixedCount(iterations), Warmup(warmup, 0.0), sync)
        label = timer.name + (f" ×{m.calls_per_sample}/replay" if m.calls_per_sample > 1 else "")
        results.append(ModeResult(label, m.samples, True, contains))
    return results


# ---- the lesson as a picture ---------------------------------------------------------------------

# The host's launch and synchronize calls as CUPTI records them (runtime and driver API), on the
# same clock as the GPU's kernels.
LAUNCH_CALLS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx")
SYNC_CALLS = ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cuCtxSynchronize")
BUSY_KERNELS = ("spin_kernel", "sleep")  # torch.cuda._sleep's kernel: the earlier GPU work


def timeline(call: Call, iterations: int, warmup: int, busy_ms: float) -> list[dict[str, Any]]:
    """A few iterations of every placement inside one CUPTI session that records GPU activity and
    the CUDA API calls only (no host op profiling, which would stretch every call by tens of µs).
    The clock's spans and the warm-up are marked with time.time_ns, the clock Kineto converts
    CUPTI's timestamps to. Each span is a dict (mode, lane "host" or "gpu", kind, start, end) in
    µs since its mode began."""
    import torch

    from cudabench.measure.cupti_activity import cupti_session, recorded
    from cudabench.measure.timers import sleep_cycles

    sync, now = torch.cuda.synchronize, time.time_ns
    modes, marks = [], []  # (mode, start ns, end ns); (mode, kind, start ns, end ns)
    sync()
    with cupti_session(host="none") as prof:
        # Primer: a session's first API calls and launches take milliseconds (CUPTI sets itself up),
        # which would stretch the first mode's picture.
        torch.cuda._sleep(1000)
        call()
        sync()
        for p in PLACEMENTS:
            begin = now()
            if busy_ms > 0:
                torch.cuda._sleep(sleep_cycles(busy_ms / 1e3))
            start = now()
            for _ in range(warmup):
                call()
            marks.append((p.name, "warm-up", start, now()))
            for _ in range(iterations):
                if p.sync_before:
                    sync()
                start = now()
                call()
                if p.sync_after:
                    sync()
                marks.append((p.name, "clock", start, now()))
            sync()  # the GPU drains inside the mode
            modes.append((p.name, begin, now()))
    origin = modes[0][1]  # µs since the first mode began: floats that small keep ns steps

    def us(ns: int) -> float:
        return (ns - origin) / 1e3

    return timeline_spans(recorded(prof, origin=origin), [(m, us(a), us(b)) for m, a, b in modes],
                          [(m, kind, us(a), us(b)) for m, kind, a, b in marks])


def timeline_spans(events: list[Any], modes: list[tuple[str, float, float]],
                   marks: list[tuple[str, str, float, float]]) -> list[dict[str, Any]]:
    """Spans per mode (see timeline), in µs since the mode began, from a session's activities and
    the host clock's marks (µs on the activities' clock), in the modes' order."""
    begins = {name: begin for name, begin, _ in modes}
    spans = [{"mode": mode, "lane": "host", "kind": kind, "start": a - begins[mode], "end": b - begins[mode]}
             for mode, kind, a, b in marks]
    for e in events:
        if e.on_gpu and not e.annotation:
            kind = "busy" if any(w in e.name.lower() for w in BUSY_KERNELS) else "kernel"
            lane = "gpu"
        elif not e.on_gpu and e.name in LAUNCH_CALLS + SYNC_CALLS:
            kind, lane = ("launch" if e.name in LAUNCH_CALLS else "synchronize"), "host"
        else:
            continue
        for name, begin, end in modes:
            if begin <= e.start <= end:
                spans.append({"mode": name, "lane": lane, "kind": kind, "start": e.start - begin,
                              "end": e.end - begin})
                break
    order = {name: i for i, (name, _, _) in enumerate(modes)}
    return sorted(spans, key=lambda s: (order[s["mode"]], s["start"]))
