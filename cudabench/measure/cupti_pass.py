"""The CUPTI pass after a subject's hot loop (cudabench.measure.blind): the same call on the same
inputs under CUPTI, for its kernel time, kernels and GPU busy time per call. The judge holds the
timer's figure to them (timed-window, no-work, impossible) and, for a call the host dominates,
its judged calls' kernel time."""

from __future__ import annotations

import statistics
import time
from dataclasses import replace
from typing import Any, Callable, Optional

from cudabench.measure.loop import Warmup, measure
from cudabench.measure.stop import FixedCount
from cudabench.results.records.model import Measurement
from cudabench.results.records.stats import summarize

# About this long of calls (at least 3, at most 10), after 3 untimed calls (1 for a call over a
# millisecond) and the session's primer. Its figures are medians of per-call counts and times that are
# stable (the timed-window check allows 20 %); a sweep's 9 ms conv1d spent 0.2 s a case in it at 20
# calls. Until 2026-11-28 0.05 s, 5 to 20 calls: the 45-subject sweep spent 1.0 s of its 10.8 here.
CUPTI_PASS_SECONDS = 0.02
CUPTI_PASS_CALLS = (3, 10)


def cupti_pass_calls(median: float, short: bool) -> tuple[int, Warmup]:
    """How many calls the pass times, and its untimed calls before them; `short`: a sync call whose
    kernel time is reported beside its figure (30 calls)."""
    fewest, most = CUPTI_PASS_CALLS
    count = 30 if short else max(fewest, min(most, int(CUPTI_PASS_SECONDS / max(median, 1e-6))))
    return count, Warmup(1 if median > 1e-3 else 3, 0.0)


def cupti_pass(call: Callable[[], Any], timer: Any, m: Any, short: bool, make_timer: Callable[[str], Any],
               sync: Callable[[], None], flush: Optional[Callable[[], None]]) -> dict[str, Any]:
    """Kernel time per call, kernels per call and GPU busy time per call. Under the cupti timer the
    hot loop's own samples are the pass."""
    start = time.perf_counter()
    if m.timing == "cupti":
        cupti, samples = timer, list(m.samples)
    else:
        cupti = make_timer("cupti")
        count, warmup = cupti_pass_calls(summarize(m.samples).median, short)
        samples = list(measure(call, cupti, FixedCount(count), warmup, sync, flush).samples)
    return {"kernel_median": summarize(samples).median, "kernel_samples": samples, "counts": list(cupti.counts),
            "busy": list(cupti.busy), "short": short, "seconds": time.perf_counter() - start}


def with_kernel_time(m: Measurement, cupti: dict[str, Any]) -> Measurement:
    """The CUPTI pass's figures beside the timer's: kernel time for launch-dominated calls, kernels
    per call."""
    extra = list(m.extra)
    median = summarize(m.samples).median
    kernel = cupti.get("kernel_median", 0.0)
    if cupti.get("short") and kernel > 0:
        extra += [("kernel_time_cupti", kernel), ("launch_and_sync_overhead", median - kernel)]
    if cupti.get("counts"):
        extra.append(("kernels_per_call", float(statistics.median(cupti["counts"]))))
    return replace(m, extra=tuple(extra))
