"""Ways to time a call. A timer returns one sample per call, in seconds per call.

    sync    host clock between two torch.cuda.synchronize(): wall time of a call, launch included
    events  CUDA events around the call, its launch hidden behind a short GPU sleep: GPU time of
            the call from its first to its last command
    graph   the call captured R times in a CUDA graph; one replay timed with events, divided by R:
            GPU time per call without per-launch host cost (graph node gaps remain)
    cupti   the durations of the call's kernels as recorded by CUPTI (Kineto), summed:
            pure kernel time, no gaps, no launch

`samples(call, count, before_each, keep)`: with `keep`, `timer.last` holds what the last timed call
returned (under `graph`, the outputs the replay rewrote), so that its outputs can be judged.

Only these are measurements. sync_modes.py holds the tutorial's broken placements, for
demonstration."""

from __future__ import annotations

import bisect
import contextlib
import math
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

import torch

from cudabench.results.records.model import TIMINGS

Call = Callable[[], Any]
Hook = Optional[Callable[[], None]]


class SyncTimer:
    name = "sync"
    last: Any = None   # what the last call returned, when sampled with keep
    describes = TIMINGS["sync"]
    batch = 1

    def prepare(self, call: Call, estimate: float) -> None:
        pass

    def samples(self, call: Call, count: int, before_each: Hook = None, keep: bool = False) -> list[float]:
        out = []
        for _ in range(count):
            if before_each:
                before_each()
            torch.cuda.synchronize()
            start = time.perf_counter()
            value = call()
            torch.cuda.synchronize()
            out.append(time.perf_counter() - start)
            self.last = value if keep else None
            del value
        return out


def sleep_cycles(seconds: float) -> int:
    """GPU clock cycles for torch.cuda._sleep to cover `seconds` (assumes <= 2 GHz, errs long)."""
    return max(1000, int(seconds * 2.0e9))


class EventTimer:
    """Events on the current stream. A GPU sleep queued first keeps the stream busy while the host
    launches the call, so the start event fires with the call's work already queued: the figure
    is GPU time, not host launch latency (the way nvbench hides launches behind a blocking kernel)."""

    name = "events"
    last: Any = None   # what the last call returned, when sampled with keep
    describes = TIMINGS["events"]
    batch = 1

    def __init__(self) -> None:
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)
        self.hide = 1000

    def prepare(self, call: Call, estimate: float) -> None:
        # host time to issue one call, without waiting for the GPU
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        call()
        issue = time.perf_counter() - t0
        torch.cuda.synchronize()
        self.hide = sleep_cycles(2 * issue + 20e-6)

    def samples(self, call: Call, count: int, before_each: Hook = None, keep: bool = False) -> list[float]:
        out = []
        for _ in range(count):
            if before_each:
                before_each()
            torch.cuda._sleep(self.hide)
            self.start.record()
            value = call()
            self.end.record()
            self.last = value if keep else None
            del value
            self.end.synchronize()
            out.append(self.start.elapsed_time(self.end) / 1e3)
        return out


def calls_per_graph(estimate: float, target: float = 1e-3, cap: int = 100) -> int:
    """Enough calls in one graph that a replay lasts about `target` seconds (1 .. cap)."""
    if estimate <= 0:
        return cap
    return max(1, min(cap, math.ceil(target / estimate)))


class GraphTimer:
    name = "graph"
    last: Any = None   # what the last call returned, when sampled with keep
    describes = TIMINGS["graph"]
    batch = 1

    def __init__(self) -> None:
        self.graph: Any = None
        self.static: Any = None
        self.per_graph = 1
        self.cap = 100  # calls per graph at most; 1 when every call must follow an L2 flush
        # A backward's stored forward, captured in a graph of its own (same pool) and replayed before each
        # sample, or by `refresh`: a replay of the backward alone reads the forward it was captured on
        self.before: Optional[Call] = None
        self.before_graph: Any = None
        self.refreshed = False  # the forward was replayed for the next sample (refresh)
        self.start, self.end = (torch.cuda.Event(enable_timing=True) for _ in range(2))

    def prepare(self, call: Call, estimate: float) -> None:
        # with a forward, one call a graph, each after its forward: hot loop and judged calls alike
        self.per_graph = 1 if self.before is not None else calls_per_graph(estimate, cap=self.cap)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm up on the capture stream, as capture requires
            for _ in range(3):
                if self.before is not None:
                    self.before()
                call()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        pool = None
        if self.before is not None:
            self.before_graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.before_graph):
                self.before()
            pool = self.before_graph.pool()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, pool=pool):
            for _ in range(self.per_graph):
                self.static = call()  # the last call's outputs: rewritten by every replay
        self.refresh()  # a capture runs nothing: the call's graph reads what this replay writes
        torch.cuda.synchronize()

    def refresh(self) -> None:
        """The forward again from the current inputs, taken as it is by the next sample (BlindRunner.forward)."""
        if self.before_graph is not None:
            self.before_graph.replay()
        self.refreshed = True

    def samples(self, call: Call, count: int, before_each: Hook = None, keep: bool = False) -> list[float]:
        self.last = self.static if keep else None
        out = []
        for _ in range(count):
            if not self.refreshed:
                self.refresh()
            self.refreshed = False
            if before_each:
                before_each()
            torch.cuda._sleep(sleep_cycles(30e-6))
            self.start.record()
            self.graph.replay()
            self.end.record()
            self.end.synchronize()
            out.append(self.start.elapsed_time(self.end) / 1e3 / self.per_graph)
        return out


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
    calls = sorted((e.start, e.end) for e in events if e.name == range_name and not e.on_gpu)
    starts = [s for s, _ in calls]
    spans: list[list[tuple[float, float]]] = [[] for _ in calls]
    for e in gpu_activity(events, {range_name}):
        i = bisect.bisect_right(starts, e.start) - 1
        if i >= 0 and e.start <= calls[i][1]:
            spans[i].append((e.start, e.end))
    return [CallActivity(sum(b - a for a, b in s) / 1e6, len(s), union_length(s) / 1e6) for s in spans]


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


@contextlib.contextmanager
def cupti_session(host_ops: bool = True) -> Iterator[Any]:
    """CPU ranges and GPU activity recorded through Kineto and CUPTI; read them after the block
    with `recorded`. Without `host_ops` only the GPU's activity and the CUDA API calls are kept,
    which leaves the host's calls nearly as fast as unprofiled. torch.autograd.profiler.profile directly: torch.profiler.profile wraps it but first
    imports Inductor's configuration, seconds of Python on a cold machine that every worker paid."""
    from torch.autograd.profiler import profile

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the profiler's notes about its own cycles
        with profile(use_kineto=True, use_device="cuda", use_cpu=host_ops) as prof:
            yield prof


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


class CuptiTimer:
    name = "cupti"
    last: Any = None   # what the last call returned, when sampled with keep
    describes = TIMINGS["cupti"]

    def __init__(self) -> None:
        self.batch = 20
        self.counts: list[int] = []  # GPU activities (kernels, copies) seen per call
        self.busy: list[float] = []  # seconds the GPU was busy per call (overlaps counted once)

    def prepare(self, call: Call, estimate: float) -> None:
        self.batch = max(5, min(200, int(0.2 / max(estimate, 1e-6))))

    def samples(self, call: Call, count: int, before_each: Hook = None, keep: bool = False) -> list[float]:
        with cupti_session() as prof:
            # primer: CUPTI may miss activity at the very start of a session. A judged call (keep) is
            # primed with a kernel of the harness's: calling the subject first would hand it the
            # judge's new input values before the timed call
            torch.cuda._sleep(1000) if keep else call()
            for _ in range(count):
                value = ranged_call(call, before_each)
                self.last = value if keep else None
                del value
        per_call = activity_per_call(recorded(prof))
        self.counts += [a.count for a in per_call]
        self.busy += [a.busy for a in per_call]
        return [a.seconds for a in per_call]


class CuptiRound:
    """CUPTI kept recording across a round of judged calls, each call inside its own CALL_RANGE, the
    samples read when the round ends. A session's start and stop take milliseconds, in which an idle
    GPU loses the state the hot loop left it in (on an H200 a small call ran 1.5-2x slower after a
    2 ms pause): one session per round, not per call."""

    name = "cupti"

    def __init__(self) -> None:
        self._session: Any = None
        self._prof: Any = None

    def start(self) -> None:
        self._session = cupti_session()
        self._prof = self._session.__enter__()
        torch.cuda._sleep(1000)  # primer: CUPTI may miss activity at the very start of a session

    def call(self, call: Call, before_each: Hook = None) -> Any:
        return ranged_call(call, before_each)

    def end(self) -> list[float]:
        """Kernel time (summed durations) of each call of the round, in call order."""
        session, self._session = self._session, None
        if session is None:
            return []
        session.__exit__(None, None, None)
        return [a.seconds for a in activity_per_call(recorded(self._prof))]


TIMERS = {"sync": SyncTimer, "events": EventTimer, "graph": GraphTimer, "cupti": CuptiTimer}


def make_timer(name: str):
    return TIMERS[name]()
