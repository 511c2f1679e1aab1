"""What a CUPTI session recorded, read straight from Kineto: each event as an `Activity`, the GPU
activity inside each call's host range (`activity_per_call`), and the session itself. The cupti timer,
the CUPTI pass, the profiled lesson and the probes read their figures through here."""

from __future__ import annotations

import bisect
import contextlib
import warnings
from dataclasses import dataclass
from typing import Any, Iterator, Optional

import torch

from cudabench.measure.loop import Call, Hook


CALL_RANGE = "cudabench::call"


@dataclass(frozen=True)
class CallActivity:
    """The GPU activity of one call: summed durations, how many activities, and the time the GPU
    was busy with them (the union of their intervals: overlapping kernels on several streams
    count once)."""

    seconds: float
    count: int
    busy: float


@dataclass(frozen=True)
class Activity:
    """One event of a CUPTI session: a host range or op (on_gpu False), or a kernel, copy or set on
    the GPU. Times in µs on the profiler's one clock."""

    name: str
    on_gpu: bool
    start: float
    end: float
    annotation: bool = False    # a record_function range (on the GPU: its shadow over the kernels)


def recorded(prof: Any, origin: Optional[int] = None) -> list[Activity]:
    """A finished session's events straight from Kineto, in µs since `origin` (ns since the
    epoch, time.time_ns's clock; default the first event). Not `function_events`: building those
    costs Python time per host op, and a cuDNN baseline records dozens of ops per call (half a
    second per subject in the CUPTI pass)."""
    from torch.autograd import DeviceType

    events = list(prof.kineto_results.events())
    # Times are ns since the epoch (about 1.8e18): subtract the origin in integers before turning
    # them into floats, whose step at that size is 256 ns (a 1.37 µs kernel would read 1.25 µs).
    if origin is None:
        origin = min((e.start_ns() for e in events), default=0)
    found = []
    for e in events:
        start = (e.start_ns() - origin) / 1e3
        found.append(Activity(e.name(), e.device_type() == DeviceType.CUDA, start, start + e.duration_ns() / 1e3,
                              bool(getattr(e, "is_user_annotation", lambda: False)())))
    return found


def activity_per_call(events: list[Activity], range_name: str = CALL_RANGE) -> list[CallActivity]:
    """GPU activity (kernels, memcpy, memset) inside each `range_name` host range. The range
    encloses the call and a device-wide synchronize, so all its GPU work — on any stream — lies
    inside it and nothing queued before (an L2 flush) does."""
    calls = outermost(sorted((e.start, e.end) for e in events if e.name == range_name and not e.on_gpu))
    starts = [s for s, _ in calls]
    spans: list[list[tuple[float, float]]] = [[] for _ in calls]
    for e in gpu_activity(events, {range_name}):
        i = bisect.bisect_right(starts, e.start) - 1
        if i >= 0 and e.start <= calls[i][1]:
            spans[i].append((e.start, e.end))
    return [CallActivity(sum(b - a for a, b in s) / 1e6, len(s), union_length(s) / 1e6) for s in spans]


def outermost(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The sorted ranges not inside an earlier one: a range of the same name that the subject's own code
    opens inside a call (record_function is public) would otherwise take the call's GPU work from it."""
    kept: list[tuple[float, float]] = []
    for a, b in spans:
        if not kept or b > kept[-1][1]:
            kept.append((a, b))
    return kept


def union_length(spans: list[tuple[float, float]]) -> float:
    """Total length covered by possibly overlapping intervals."""
    total, reach = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > reach:
            total += b - max(a, reach)
            reach = b
    return total


def gpu_activity(events: list[Activity], ranges: set[str]) -> list[Activity]:
    """Kernels, copies and sets on the GPU — not the GPU-side shadows of record_function ranges
    (user annotations, named like the `ranges`), which span the same kernels and would count
    them twice."""
    return [e for e in events if e.on_gpu and not e.annotation and e.name not in ranges]


HOST = ("ops", "ranges", "none")  # what a session records on the host beside the GPU's activity


@contextlib.contextmanager
def cupti_session(host: str = "ops") -> Iterator[Any]:
    """GPU activity and the CUDA API calls recorded through Kineto and CUPTI, with on the host (`host`):
    every op ("ops"), only the record_function ranges ("ranges": the harness's call ranges, without the
    dozens of ops a cuDNN baseline runs per call, each of which the profiler times and records), or
    nothing ("none", which leaves the host's calls nearly as fast as unprofiled). Read the events
    after the block with `recorded`. torch.autograd.profiler.profile directly: torch.profiler.profile
    wraps it but first imports Inductor's configuration, seconds of Python on a cold machine that
    every worker paid."""
    from torch.autograd.profiler import profile

    if host not in HOST:
        raise ValueError(f"host must be one of {HOST}, not {host!r}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the profiler's notes about its own cycles
        if host == "ranges":
            with _ranges_session() as prof:
                yield prof
        else:
            with profile(use_kineto=True, use_device="cuda", use_cpu=host == "ops") as prof:
                yield prof


@contextlib.contextmanager
def _ranges_session() -> Iterator[Any]:
    """A session that observes only user scopes (record_function) on the host: torch's profiler with its
    context manager's configuration and the scopes that has no argument for. Unlike the context manager
    it runs no on-start callbacks and leaves `torch.autograd.profiler._is_profiler_enabled` False, so
    Inductor's code takes its unprofiled path, as in the hot loop. A torch whose internals differ gets
    the context manager with every host op ("ops")."""
    from torch.autograd.profiler import profile

    settings = profile(use_kineto=True, use_device="cuda", use_cpu=True)  # its configuration, never entered
    try:
        from torch._C._profiler import RecordScope
        from torch.autograd import _disable_profiler, _enable_profiler, _prepare_profiler

        config, activities = settings.config(), settings.kineto_activities
        _prepare_profiler(config, activities)
        _enable_profiler(config, activities, {RecordScope.USER_SCOPE})
    except (ImportError, AttributeError, TypeError):
        with profile(use_kineto=True, use_device="cuda", use_cpu=True) as prof:
            yield prof
        return
    session = _Recorded()
    try:
        yield session
    finally:
        if torch.cuda.is_available():
            torch.cuda.synchronize()  # as the context manager does: the last kernels' records arrive
        session.kineto_results = _disable_profiler()


class _Recorded:
    """What `recorded` reads of a session: Kineto's results once it ended."""

    kineto_results: Any = None


def ranged_call(call: Call, before_each: Hook = None) -> Any:
    """One call inside its CALL_RANGE, the device synchronised before and inside it, so all its GPU
    work and nothing queued before lies in the range (see activity_per_call)."""
    from torch.autograd.profiler import record_function

    if before_each:
        before_each()
    torch.cuda.synchronize()
    with record_function(CALL_RANGE):
        value = call()
        torch.cuda.synchronize()
    return value
