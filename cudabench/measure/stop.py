"""Stop rules: when a measurement has enough samples. One interface (`decide`), chosen by name on the
command line, and a plain-data form so the parent can send a rule to a worker process."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Optional, Protocol, Sequence

from cudabench.results.records.stats import summarize


class StopRule(Protocol):
    def decide(self, samples: Sequence[float], elapsed: float) -> Optional[str]:
        """A stop reason once enough samples are in, else None."""

    def most(self, taken: int) -> Optional[int]:
        """The most samples still wanted after `taken`, when the rule knows (a batch is cut to it)."""


@dataclass(frozen=True)
class FixedCount:
    """--repeat N: exactly N samples."""

    count: int

    def decide(self, samples: Sequence[float], elapsed: float) -> Optional[str]:
        return f"reached --repeat {self.count}" if len(samples) >= self.count else None

    def most(self, taken: int) -> Optional[int]:
        return max(1, self.count - taken)


@dataclass(frozen=True)
class MinTime:
    """--min-time S: at least `min_samples` samples and S seconds of sampling."""

    seconds: float
    min_samples: int = 10

    def decide(self, samples: Sequence[float], elapsed: float) -> Optional[str]:
        if len(samples) >= self.min_samples and elapsed >= self.seconds:
            return f"sampled for --min-time {self.seconds:g} s"
        return None

    def most(self, taken: int) -> Optional[int]:
        return None


@dataclass(frozen=True)
class Adaptive:
    """The default: after `min_samples` and `min_time`, stop as soon as the median is known
    precisely enough: half the width of its 95 % confidence interval at most `target` of it. Give
    up at `max_time` and say how precisely it was known. The spread of single calls (IQR/median)
    is a property of the call that more samples do not shrink; the interval of the median shrinks
    as 1/√n."""

    target: float = 0.005
    min_samples: int = 10
    min_time: float = 0.1
    max_time: float = 2.0
    max_samples: int = 100_000

    def most(self, taken: int) -> Optional[int]:
        return max(1, self.max_samples - taken)

    def decide(self, samples: Sequence[float], elapsed: float) -> Optional[str]:
        n = len(samples)
        if n >= self.max_samples:
            return f"sample cap {self.max_samples} reached (median ±{summarize(samples).precision:.2%})"
        if n < self.min_samples or elapsed < self.min_time:
            return None
        timed_out = elapsed >= self.max_time
        if not timed_out and n % max(1, n // 50):  # re-summarising every sample is wasteful
            return None
        precision = summarize(samples).precision
        if precision <= self.target:
            return f"median ±{precision:.2%} (95 % CI) <= target ±{self.target:.2%}"
        if timed_out:
            return (f"time limit {self.max_time:g} s reached with the median ±{precision:.2%} (95 % CI) "
                    f"> target ±{self.target:.2%}")
        return None


RULES = {"repeat": FixedCount, "min_time": MinTime, "adaptive": Adaptive}


def rule_to_dict(rule: StopRule) -> dict[str, Any]:
    kind = next(name for name, cls in RULES.items() if isinstance(rule, cls))
    return {"kind": kind, **asdict(rule)}


def rule_from_dict(data: dict[str, Any]) -> StopRule:
    fields = dict(data)
    return RULES[fields.pop("kind")](**fields)
