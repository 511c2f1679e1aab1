"""Ways to time a call. A timer returns one sample per call, in seconds per call.

    sync    host clock between two torch.cuda.synchronize(): wall time of a call, launch included
    events  CUDA events around the call, its launch hidden behind a short GPU sleep: GPU time of
            the call from its first to its last command
    graph   R calls captured in a CUDA graph (in a run each on inputs of its own, as many as fit the L2
            together: cudabench.measure.lanes); one replay timed with events, divided by R: GPU time
            per call without per-launch host cost (graph node gaps remain)
    cupti   the durations of the call's kernels as recorded by CUPTI (Kineto), summed:
            pure kernel time, no gaps, no launch

`samples(call, count, before_each, keep)`: with `keep`, `timer.last` holds what the last timed call
returned (under `graph`, the first call's outputs the replay rewrote; `statics` holds every call's),
so that its outputs can be judged.

Only these are measurements. sync_modes.py holds the tutorial's broken placements, for
demonstration."""

from __future__ import annotations

import math
import time
from typing import Any, Callable, Optional

import torch

from cudabench.measure.cupti_activity import CallActivity, activity_per_call, cupti_session, ranged_call, recorded
from cudabench.measure.loop import Call, Hook
from cudabench.results.records.model import TIMINGS


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
    """Replays of a CUDA graph of `per_graph` calls, each replay timed with events and divided by the
    calls. Given `lanes` (the subject process: cudabench.measure.lanes), each call of the graph reads inputs
    of its own and writes outputs of its own (`statics`, in call order), so that the judge can check any
    call of a judged replay: a graph whose calls share inputs can have one call compute and the others
    copy it, or skip their work on all but the call whose outputs are read."""

    name = "graph"
    last: Any = None   # what the first call returned, when sampled with keep
    describes = TIMINGS["graph"]
    batch = 1

    def __init__(self) -> None:
        self.graph: Any = None
        self.statics: list = []  # each call's outputs, in call order (without lanes: the last call's)
        self.per_graph = 1
        self.cap = 100  # calls per graph at most; 1 when every call must follow an L2 flush
        # n -> the graph's calls after the one prepare is given (n - 1), each on inputs of its own
        self.lanes: Optional[Callable[[int], list[Call]]] = None
        # A backward's stored forward, captured in a graph of its own (same pool) and replayed before each
        # sample, or by `refresh`: a replay of the backward alone reads the forward it was captured on
        self.before: Optional[Call] = None
        self.before_graph: Any = None
        self.refreshed = False  # the forward was replayed for the next sample (refresh)
        self.events: Any = None

    def prepare(self, call: Call, estimate: float) -> None:
        # with a forward, one call a graph, each after its forward: hot loop and judged calls alike
        self.per_graph = 1 if self.before is not None else calls_per_graph(estimate, cap=self.cap)
        calls = [call] * self.per_graph
        if self.lanes is not None and self.per_graph > 1:
            calls = [call] + self.lanes(self.per_graph)
        self._warm(calls)
        self.statics = self._capture(calls)

    def _warm(self, calls: list[Call]) -> None:
        """Three calls, and each lane's once, on the capture's side stream, as capture requires."""
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for c in [calls[0]] * 2 + list(dict.fromkeys(calls)):
                if self.before is not None:
                    self.before()
                c()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()

    def _capture(self, calls: list[Call]) -> list:
        pool = None
        if self.before is not None:
            self.before_graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.before_graph):
                self.before()
            pool = self.before_graph.pool()
        self.graph = torch.cuda.CUDAGraph()
        statics: list = []
        with torch.cuda.graph(self.graph, pool=pool):
            for c in calls:
                # every call's outputs kept (memory of their own) when each call has inputs of its own;
                # else only the last call's, rewritten by every call of a replay
                statics = statics + [c()] if self.lanes is not None else [c()]
        self.refresh()  # a capture runs nothing: the call's graph reads what this replay writes
        torch.cuda.synchronize()
        return statics

    def refresh(self) -> None:
        """The forward again from the current inputs, taken as it is by the next sample (BlindRunner.forward)."""
        if self.before_graph is not None:
            self.before_graph.replay()
        self.refreshed = True

    def samples(self, call: Call, count: int, before_each: Hook = None, keep: bool = False) -> list[float]:
        self.last = self.statics[0] if keep else None
        out = []
        for _ in range(count):
            if not self.refreshed:
                self.refresh()
            self.refreshed = False
            if before_each:
                before_each()
            out.append(self._timed_replay() / self.per_graph)
        return out

    def _timed_replay(self) -> float:
        if self.events is None:
            self.events = tuple(torch.cuda.Event(enable_timing=True) for _ in range(2))
        start, end = self.events
        torch.cuda._sleep(sleep_cycles(30e-6))
        start.record()
        self.graph.replay()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3


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
        with cupti_session(host="ranges") as prof:
            # primer: CUPTI may miss activity at the very start of a session. A judged call (keep) is
            # primed with a kernel of the harness's: calling the subject first would hand it the
            # judge's new input values before the timed call
            torch.cuda._sleep(1000) if keep else call()
            for _ in range(count):
                value = ranged_call(call, before_each)
                self.last = value if keep else None
                del value
        per_call = activity_per_call(recorded(prof))
        if len(per_call) != count:
            raise RuntimeError(f"CUPTI recorded {len(per_call)} call ranges for {count} calls (a range of the "
                               "harness's name opened by the subject's code?)")
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
        self._session = cupti_session(host="ranges")
        self._prof = self._session.__enter__()
        torch.cuda._sleep(1000)  # primer: CUPTI may miss activity at the very start of a session

    def call(self, call: Call, before_each: Hook = None) -> Any:
        return ranged_call(call, before_each)

    def end(self) -> list[CallActivity]:
        """The GPU activity of each call of the round, in call order: kernel time (summed durations)
        and busy time (their union)."""
        session, self._session = self._session, None
        if session is None:
            return []
        session.__exit__(None, None, None)
        return activity_per_call(recorded(self._prof))


TIMERS = {"sync": SyncTimer, "events": EventTimer, "graph": GraphTimer, "cupti": CuptiTimer}


def make_timer(name: str):
    return TIMERS[name]()
