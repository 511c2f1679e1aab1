"""The measurement loop as named phases — warm-up (outside the numbers), timer preparation,
then timed samples until a stop rule says enough — and the stop rules themselves."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol, Sequence

from cudabench.results.model import Measurement
from cudabench.results.stats import summarize

Call = Callable[[], Any]
Hook = Optional[Callable[[], None]]


class Timer(Protocol):
    name: str
    batch: int

    def prepare(self, call: Call, estimate: float) -> None: ...

    def samples(self, call: Call, count: int, before_each: Hook = None) -> list[float]: ...


class StopRule(Protocol):
    def decide(self, samples: Sequence[float], elapsed: float) -> Optional[str]:
        """A stop reason once enough samples are in, else None."""


@dataclass(frozen=True)
class FixedCount:
    """--repeat N: exactly N samples."""

    count: int

    def decide(self, samples: Sequence[float], elapsed: float) -> Optional[str]:
        return f"reached --repeat {self.count}" if len(samples) >= self.count else None


@dataclass(frozen=True)
class MinTime:
    """--min-time S: at least `min_samples` samples and S seconds of sampling."""

    seconds: float
    min_samples: int = 10

    def decide(self, samples: Sequence[float], elapsed: float) -> Optional[str]:
        if len(samples) >= self.min_samples and elapsed >= self.seconds:
            return f"sampled for --min-time {self.seconds:g} s"
        return None


@dataclass(frozen=True)
class Adaptive:
    """The default: after `min_samples` and `min_time`, stop as soon as the relative noise
    (IQR / median) is at most `target`; give up at `max_time` and say how noisy it stayed."""

    target: float = 0.005
    min_samples: int = 10
    min_time: float = 0.1
    max_time: float = 2.0
    max_samples: int = 100_000

    def decide(self, samples: Sequence[float], elapsed: float) -> Optional[str]:
        n = len(samples)
        if n >= self.max_samples:
            return f"sample cap {self.max_samples} reached (noise {summarize(samples).noise:.2%})"
        if n < self.min_samples or elapsed < self.min_time:
            return None
        timed_out = elapsed >= self.max_time
        if not timed_out and n % max(1, n // 50):  # re-summarising every sample is wasteful
            return None
        noise = summarize(samples).noise
        if noise <= self.target:
            return f"noise {noise:.2%} <= target {self.target:.2%}"
        if timed_out:
            return f"time limit {self.max_time:g} s reached with noise {noise:.2%} > target {self.target:.2%}"
        return None




@dataclass(frozen=True)
class Warmup:
    """Untimed calls before sampling: at least `calls`, and at least `seconds` of them.
    Returns (calls done, seconds spent, the median seconds per call seen)."""

    calls: int = 3
    seconds: float = 0.1

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
            before_each: Hook = None, cache: str = "hot") -> Measurement:
    """Warm up, prepare the timer (e.g. capture a graph), then take samples in the timer's batch
    size until `rule` stops. `before_each` (e.g. an L2 flush) runs outside the timed region."""
    warm_calls, warm_seconds, estimate = warmup.run(call, sync)
    timer.prepare(call, estimate)
    samples: list[float] = []
    start = time.perf_counter()
    reason: Optional[str] = None
    while reason is None:
        batch = timer.samples(call, timer.batch, before_each)
        if not batch:
            raise RuntimeError(f"the {timer.name} timer recorded nothing (is another profiler holding CUPTI?)")
        for s in batch:
            samples.append(s)
            reason = rule.decide(samples, time.perf_counter() - start)
            if reason:
                break
    return Measurement(samples=tuple(samples), timing=timer.name, warmup_calls=warm_calls,
                       warmup_seconds=warm_seconds, stop_reason=reason, cache=cache,
                       calls_per_sample=getattr(timer, "per_graph", 1))
