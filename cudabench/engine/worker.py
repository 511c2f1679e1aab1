"""The worker: what `cudabench profile` re-launches under nsys, ncu or torch.profiler. It builds and
checks the kernel and warms it up outside the capture, measures it once with CUDA events (for the
parent's agreement check), then runs the timed region between cudaProfilerStart/Stop with NVTX
ranges, and writes a small JSON summary for the parent."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Optional

from cudabench import nvtx
from cudabench.device import require_gpu
from cudabench.measure.loop import FixedCount, Warmup, measure
from cudabench.spec.registry import Registry
from cudabench.engine.runner import checked_call, plan_single
from cudabench.spec.shapes import parse_shape
from cudabench.results.stats import summarize
from cudabench.measure.timers import EventTimer, gpu_activity

CALL_SUFFIX = " call"


def timed_region(call: Callable[[], Any], name: str, iterations: int) -> None:
    import torch

    with nvtx.range(f"timed {name}", "timed"):
        for _ in range(iterations):
            with nvtx.range(name + CALL_SUFFIX, "iteration"):
                call()
                torch.cuda.synchronize()


def run_worker(registry: Registry, kernel: str, shape: str, direction: str, tool: str, iterations: int,
               summary_path: Path, seed: int, trace_path: Optional[Path] = None) -> dict:
    import torch

    nvtx.configure(True, backend=os.environ.get("CUDABENCH_NVTX_BACKEND", "nvtx"), iterations=True)
    task = plan_single(registry, kernel, parse_shape(shape), direction)
    require_gpu()
    name = task.variants[0].name
    with nvtx.range(f"build and check {name}", "check"):
        call, check = checked_call(task, seed)
    with nvtx.range(f"warm-up {name}", "warmup"):
        events = measure(call, EventTimer(), FixedCount(max(20, iterations)), Warmup(), torch.cuda.synchronize)
    summary: dict[str, Any] = {
        "kernel": name, "case": task.cases[0].key(), "iterations": iterations, "tool": tool,
        "check": dict(check.errors), "events_median": summarize(events.samples).median,
        "nvtx_backend": nvtx.backend(),
    }
    if tool == "torch":
        summary["kernels"] = torch_profile(call, name, iterations, trace_path)
        summary["trace"] = str(trace_path) if trace_path else None
    else:
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        timed_region(call, name, iterations)
        torch.cuda.profiler.stop()
    summary_path.write_text(json.dumps(summary, indent=1))
    return summary


def torch_profile(call: Callable[[], Any], name: str, iterations: int, trace_path: Optional[Path]) -> list:
    """torch.profiler over the timed region: [kernel name, duration in seconds] per GPU activity."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(iterations):
            with record_function(name + CALL_SUFFIX):
                call()
                torch.cuda.synchronize()
    if trace_path is not None:
        prof.export_chrome_trace(str(trace_path))
    activity = gpu_activity(list(prof.events()), {name + CALL_SUFFIX})
    return [[e.name, e.time_range.elapsed_us() / 1e6] for e in activity]
