"""The region a profiler records, inside a worker: one CUDA-event measurement first (the figure the
parent compares the profiler's kernel time with), then `iterations` calls between
cudaProfilerStart/Stop with an NVTX range around each (nsys, ncu), or under torch.profiler."""

from __future__ import annotations

from typing import Any, Callable, Optional

from cudabench import nvtx
from cudabench.measure.loop import Warmup, measure
from cudabench.measure.stop import FixedCount
from cudabench.measure.timers import EventTimer, cupti_session, gpu_activity, recorded
from cudabench.results.records.stats import summarize

CALL_SUFFIX = nvtx.CALL_SUFFIX


def profiled_region(call: Callable[[], Any], name: str, tool: str, iterations: int,
                    trace_path: Optional[str]) -> dict[str, Any]:
    import torch

    with nvtx.range(f"warm-up {name}", "warmup"):
        events = measure(call, EventTimer(), FixedCount(max(20, iterations)), Warmup(), torch.cuda.synchronize)
    summary: dict[str, Any] = {"iterations": iterations, "tool": tool,
                               "events_median": summarize(events.samples).median}
    if tool == "torch":
        summary["kernels"] = torch_profile(call, name, iterations, trace_path)
        summary["trace"] = trace_path
    else:
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        timed_region(call, name, iterations)
        torch.cuda.profiler.stop()
    return summary


def timed_region(call: Callable[[], Any], name: str, iterations: int) -> None:
    import torch

    with nvtx.range(f"timed {name}", "timed"):
        for _ in range(iterations):
            with nvtx.range(name + CALL_SUFFIX, "iteration"):
                call()
                torch.cuda.synchronize()


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
