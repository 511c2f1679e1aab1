"""Summary statistics of timing samples. Pure functions, no torch. numpy is imported at the first
summary, not with the module: the command-line process imports this to plan, and numpy's import is a
third of its start (0.06 of 0.18 s here by -X importtime; under cProfile on the H100 machine, 0.35 of
the 0.63 s of importing the command line)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Sequence

from cudabench.results.records.model import Stats

if TYPE_CHECKING:
    import numpy as np


def summarize(samples: Sequence[float]) -> Stats:
    """Median, quartiles, min/max, mean and sample stdev of a non-empty list of samples."""
    import numpy as np

    if len(samples) == 0:
        raise ValueError("no samples to summarize")
    xs = np.asarray(samples, dtype=np.float64)
    if xs.size == 1:
        x = float(xs[0])
        return Stats(n=1, median=x, q1=x, q3=x, min=x, max=x, mean=x, stdev=0.0)
    # linear interpolation between order statistics (statistics.quantiles' "inclusive" method)
    q1, median, q3 = (float(v) for v in np.percentile(xs, [25, 50, 75]))
    low, high = median_interval(xs)
    return Stats(
        ci_low=low,
        ci_high=high,
        n=int(xs.size),
        median=median,
        q1=q1,
        q3=q3,
        min=float(xs.min()),
        max=float(xs.max()),
        mean=float(xs.mean()),
        stdev=float(xs.std(ddof=1)),
    )


Z95 = 1.959964  # two-sided 95 % quantile of the normal distribution


def median_interval(samples: Sequence[float] | np.ndarray) -> tuple[float, float]:
    """A distribution-free 95 % confidence interval of the median: the order statistics whose ranks
    are n/2 ∓ 1.96·√n/2 (how many samples fall below the median is binomial(n, 1/2)). It assumes
    independent samples; consecutive calls drift together a little, so it measures precision, it
    does not promise coverage. With few samples it is the whole range."""
    import numpy as np

    xs = np.sort(np.asarray(samples, dtype=np.float64))
    n = xs.size
    half = Z95 * math.sqrt(n) / 2
    lower = max(1, math.floor(n / 2 - half))          # 1-based ranks
    upper = min(n, math.ceil(n / 2 + 1 + half))
    return float(xs[lower - 1]), float(xs[upper - 1])


def relative_noise(samples: Sequence[float]) -> float:
    """IQR / median: how far apart the middle half of the samples lies, relative to the median."""
    return summarize(samples).noise


def speedup(baseline_median: float, subject_median: float) -> float:
    """How many times faster the subject is than the baseline (>1 means faster)."""
    if subject_median <= 0:
        return float("nan")
    return baseline_median / subject_median


def throughput(amount: float, seconds: float) -> float:
    """Work per second (flops/s or bytes/s); 0 when there is no work counted."""
    if amount <= 0 or seconds <= 0:
        return 0.0
    return amount / seconds
