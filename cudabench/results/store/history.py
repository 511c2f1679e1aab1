"""A subject's median across the runs of a results store, oldest first, with the points where it
changed: each run judged against the one before by compare's noise-aware test (bootstrap interval
of the ratio of medians against the threshold)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional

from cudabench.results.compare.verdicts import compare_pair, measured_samples
from cudabench.results.store.database import Point

Series = tuple[str, str, str]  # (GPU model, case key, subject) of results timed alike


@dataclass(frozen=True)
class Step:
    """One run of a series: its figure, and how it compares with the run before it."""

    point: Point
    median: float
    precision: float       # half the median's 95 % interval, relative
    ratio: float = 1.0     # median / the previous run's median
    verdict: str = ""      # compare's verdict against the previous run ("" for the first)

    @property
    def changed(self) -> bool:
        return self.verdict in ("slower", "faster")


def select(points: Iterable[Point], kernels: Iterable[str] = (), case: str = "", gpu: str = "") -> list[Point]:
    """Measured results of these kernels (a subject or a family name), whose case key contains
    `case` and whose GPU model contains `gpu`."""
    names = set(kernels)
    return [p for p in points
            if (not names or p.result["subject"] in names or p.result["case"]["family"] in names)
            and case in p.result["case"]["key"] and gpu in p.gpu and measured_samples(p.result) is not None]


def series(points: Iterable[Point], threshold: float) -> dict[Series, list[Step]]:
    """Each (GPU, case, subject) in run order, each run judged against the previous one. Results
    timed differently (sync/events/graph/cupti, hot/cold L2) are separate series, their timer in
    the case key's place; a run that measured one twice (several GPUs of one model) counts once,
    with its last result."""
    grouped: dict[Series, dict[int, Point]] = {}
    for p in points:
        key = (p.gpu, p.result["case"]["key"] + _timed(p.result), p.result["subject"])
        grouped.setdefault(key, {})[p.run.id] = p
    return {key: _steps(list(found.values()), threshold) for key, found in grouped.items()}


def _timed(result: Mapping[str, Any]) -> str:
    m = result.get("measurement") or {}
    how = [m.get("timing", "sync"), m.get("cache", "hot")]
    return "" if how == ["sync", "hot"] else f" ({', '.join(how)})"


def _steps(points: list[Point], threshold: float) -> list[Step]:
    steps: list[Step] = []
    before: Optional[Point] = None
    for p in points:
        xs = measured_samples(p.result)
        median = float((p.result.get("stats") or {}).get("median") or 0.0)
        precision = float((p.result.get("stats") or {}).get("precision") or float("nan"))
        if before is None:
            steps.append(Step(p, median, precision))
        else:
            row = compare_pair(before.result, p.result, measured_samples(before.result), xs, threshold, p.gpu)
            steps.append(Step(p, median, precision, row.ratio, row.verdict))
        before = p
    return steps
