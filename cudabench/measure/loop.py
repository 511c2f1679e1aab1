"""The measurement loop as named phases: warm-up (outside the numbers), timer preparation, then timed
samples until a stop rule (cudabench.measure.stop) says enough."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol

from cudabench.measure.stop import StopRule
from cudabench.results.records.model import Measurement

Call = Callable[[], Any]
Hook = Optional[Callable[[], None]]


class Timer(Protocol):
    name: str
    batch: int

    def prepare(self, call: Call, estimate: float) -> None: ...

    def samples(self, call: Call, count: int, before_each: Hook = None) -> list[float]: ...


@dataclass(frozen=True)
class Warmup:
    """Untimed calls before sampling: at least `calls`, and at least `seconds` of them.
    Returns (calls done, seconds spent, the median seconds per call seen). By the time it runs, the
    subject's check has loaded its module and made its first calls; the warm-up is for the caches
    and clocks. 100 ms cost a 45-subject sweep 4.5 s, as much as its sampling. On the H100, neither 100
    against 25 ms (triton's do_bench) nor 25 against 10 ms moved a median by more than two runs at one
    setting differ by (for short sync calls, whose host part moves between runs, about as much): the
    timex sweep and attention forward and backward under events, matmul and add2 under sync
    (docs/benchmarks/warm.md, twenty-fourth session)."""

    calls: int = 3
    seconds: float = 0.010

    def run(self, call: Call, sync: Callable[[], None]) -> tuple[int, float, float]:
        start = time.perf_counter()
        times = []
        while len(times) < max(1, self.calls) or time.perf_counter() - start < self.seconds:
            t0 = time.perf_counter()
            call()
            sync()
            times.append(time.perf_counter() - t0)
        times.sort()
        return len(times), time.perf_counter() - start, times[len(times) // 2]


def measure(call: Call, timer: Timer, rule: StopRule, warmup: Warmup, sync: Callable[[], None],
            before_each: Hook = None, cache: str = "hot",
            on_batch: Optional[Callable[[int, int], None]] = None) -> Measurement:
    """Warm up, prepare the timer (e.g. capture a graph), then take samples in the timer's batch
    size (never more than the rule can still want: a CUPTI batch is a profiler session) until `rule` stops. `before_each` (e.g. an L2 flush) runs outside the timed region.
    `on_batch(first, count)` is told of each batch as it ends (the clock monitor marks its time)."""
    warm_calls, warm_seconds, estimate = warmup.run(call, sync)
    prepared = time.perf_counter()
    timer.prepare(call, estimate)
    samples: list[float] = []
    start = time.perf_counter()
    warm_seconds += start - prepared  # untimed too: the timer's preparation (a graph's capture) counts as warm-up
    reason: Optional[str] = None
    while reason is None:
        most = rule.most(len(samples))
        batch = timer.samples(call, timer.batch if most is None else min(timer.batch, most), before_each)
        if not batch:
            raise RuntimeError(f"the {timer.name} timer recorded nothing (is another profiler holding CUPTI?)")
        if on_batch is not None:
            on_batch(len(samples), len(batch))
        for s in batch:
            samples.append(s)
            reason = rule.decide(samples, time.perf_counter() - start)
            if reason:
                break
    return Measurement(samples=tuple(samples), timing=timer.name, warmup_calls=warm_calls,
                       warmup_seconds=warm_seconds, stop_reason=reason, cache=cache,
                       calls_per_sample=getattr(timer, "per_graph", 1))
