"""The region a profiler records, inside a worker: one CUDA-event measurement first (the figure the
parent compares the profiler's kernel time with), then `iterations` calls between
cudaProfilerStart/Stop with an NVTX range around each (nsys, ncu), or under torch.profiler.

Under nsys the captured calls are timed by events as well, each the way the events timer takes a
sample (a GPU sleep first, outside the call's range, hides the host's launches), so the report's
kernel time is compared with events on the same calls. Tracing can slow a kernel itself: on the H100
nsys's capture made timex-fft's fwdbwd 17 % slower by events (475 µs before the capture, 560 µs in
it; scratch/prof_probe.py), which is why the figure from before the capture is kept beside it."""

from __future__ import annotations

import statistics
from typing import Any, Callable, Optional

from cudabench import nvtx
from cudabench.measure.loop import Warmup, measure
from cudabench.measure.stop import FixedCount
from cudabench.measure.cupti_activity import cupti_session, gpu_activity, recorded
from cudabench.measure.timers import EventTimer, sleep_cycles
from cudabench.results.records.stats import summarize

CALL_SUFFIX = nvtx.CALL_SUFFIX


def profiled_region(call: Callable[[], Any], name: str, tool: str, iterations: int,
                    trace_path: Optional[str]) -> dict[str, Any]:
    import torch

    timer = EventTimer()
    with nvtx.range(f"warm-up {name}", "warmup"):
        events = measure(call, timer, FixedCount(max(20, iterations)), Warmup(), torch.cuda.synchronize)
    summary: dict[str, Any] = {"iterations": iterations, "tool": tool,
                               "events_median": summarize(events.samples).median}
    if tool == "torch":
        summary["kernels"] = torch_profile(call, name, iterations, trace_path)
        summary["trace"] = trace_path
    else:
        pairs = event_pairs(2 * iterations) if tool == "nsys" else []  # ncu replays kernels alone: no events
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        if pairs:
            evented_region(call, name, pairs, timer.hide)
        else:
            timed_region(call, name, iterations)
        torch.cuda.profiler.stop()
        if pairs:
            summary.update(event_figures(pairs))
    return summary


def timed_region(call: Callable[[], Any], name: str, iterations: int) -> None:
    import torch

    with nvtx.range(f"timed {name}", "timed"):
        for _ in range(iterations):
            with nvtx.range(name + CALL_SUFFIX, "iteration"):
                call()
                torch.cuda.synchronize()


def event_pairs(count: int) -> list[tuple[Any, Any]]:
    """Timing events, each recorded once so that the driver made them before the capture: a capture
    holds only what the calls need."""
    import torch

    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(count)]
    for start, end in pairs:
        start.record()
        end.record()
    torch.cuda.synchronize()
    return pairs


def evented_region(call: Callable[[], Any], name: str, pairs: list[tuple[Any, Any]], hide: int) -> None:
    """The captured calls, each between two events after a GPU sleep (outside its NVTX range), each
    followed by an empty event pair: what the events add to a call's figure by themselves. The sleep
    is three times the events timer's: a traced launch is slower."""
    import torch

    with nvtx.range(f"timed {name}", "timed"):
        for i, (start, end) in enumerate(pairs):
            torch.cuda._sleep(max(3 * hide, sleep_cycles(20e-6)))
            start.record()
            if i % 2 == 0:
                with nvtx.range(name + CALL_SUFFIX, "iteration"):
                    call()
            end.record()
            torch.cuda.synchronize()


def event_figures(pairs: list[tuple[Any, Any]]) -> dict[str, float]:
    """Read after the capture: nsys 2023.4 cannot process a report in which CUDA 13's elapsed-time
    call was captured ("Unknown runtime API function index")."""
    times = [start.elapsed_time(end) / 1e3 for start, end in pairs]
    return {"captured_events_median": statistics.median(times[0::2]), "events_overhead": statistics.median(times[1::2])}


def torch_profile(call: Callable[[], Any], name: str, iterations: int, trace_path: Optional[str]) -> list:
    """torch.profiler over the timed region: [kernel name, duration in seconds] per GPU activity."""
    import torch
    from torch.autograd.profiler import record_function

    with cupti_session() as prof:
        for _ in range(iterations):
            with record_function(name + CALL_SUFFIX):
                call()
                torch.cuda.synchronize()
    if trace_path is not None:
        prof.export_chrome_trace(str(trace_path))
    activity = gpu_activity(recorded(prof), {name + CALL_SUFFIX})
    return [[e.name, (e.end - e.start) / 1e6] for e in activity]
