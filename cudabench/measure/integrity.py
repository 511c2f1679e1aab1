"""Integrity checks: whether a timed figure can be trusted, whatever the kernel did to look fast.
Each returns an IntegrityCheck (pass, fail or not run, with the figures behind the verdict); any
failure makes the subject INVALID.

    stale-output   after timing, the inputs are refilled in place with new random values and the
                   call must match the fp64 reference on those (a result cached by pointer or
                   shape returns the old answer)
    stream-order   with PyTorch's current stream held busy, the original inputs are written back
                   on it and the call is made and its outputs copied on it; the copies must match
                   the reference (work on a private stream reads the inputs too early or is read
                   before it is done)
    timed-window   the GPU time CUPTI sees per call (any stream, overlaps counted once) must not
                   exceed the timer's figure beyond noise (work that escaped the timed stream)
    no-work        a call of a family that counts flops or bytes must record GPU activity
    impossible     the figure must not imply more FLOP/s than the fp32 FMA peak or more bytes/s than
                   the bandwidth ceiling that applies (DRAM when the working set exceeds L2, or
                   the cache is flushed; the measured L2 bandwidth otherwise)
    process-state  the call must not replace the functions the timers rely on, nor leave a
                   persisting-L2 carve-out behind under --cold (both fake the figure)
"""

from __future__ import annotations

import statistics
from typing import Any, Sequence

from cudabench.results.model import Check, IntegrityCheck

WINDOW_SHARE = 0.8          # the timer may see down to this share of CUPTI's busy time (noise)
WINDOW_SLACK = 2e-6         # ... minus this many seconds (profiler timestamp granularity)
FLOP_MARGIN = 1.10          # a figure above 110 % of the FMA peak is impossible (clock readings vary)
# bf16 / fp16: the theoretical tensor-core peak is not read from the device, so the bound is the
# measured cuBLAS GEMM with room: cuBLAS reaches 70-80 % of the dense peak (H100: about 750 of 989
# TFLOP/s), so 150 % of it lies above the peak itself.
TENSOR_MARGIN = 1.50
BANDWIDTH_MARGIN = 1.25     # read-heavy kernels can beat a copy's bandwidth somewhat, never by 25 %


def fmt(seconds: float) -> str:
    us = seconds * 1e6
    return f"{us:.2f} µs" if us < 10 else f"{us:.1f} µs" if us < 1e4 else f"{us / 1e3:.2f} ms"


def from_check(name: str, check: Check, before: float, what: str) -> IntegrityCheck:
    """A correctness re-check turned into an integrity verdict."""
    if check.passed:
        return IntegrityCheck(name, "pass", f"error {check.worst:.1e}")
    worst = "NaN" if check.worst != check.worst else f"{check.worst:.2g}"
    return IntegrityCheck(name, "fail", f"error {worst} (was {before:.1e} in the check): {what}")


STALE_WHAT = "after its inputs were refilled in place with new values, the output did not follow them (a result " \
             "cached by pointer or shape?)"
ORDER_WHAT = "with PyTorch's current stream busy, its outputs did not reflect the inputs written on that stream " \
             "(work launched on another stream, not ordered with the current one?)"


def timed_window(figure: float, busy: Sequence[float], timer: str) -> IntegrityCheck:
    if not busy:
        return IntegrityCheck("timed-window", "not run", "CUPTI recorded no calls")
    gpu = statistics.median(busy)
    detail = f"timer {fmt(figure)} per call, GPU busy {fmt(gpu)} per call (CUPTI)"
    if figure < WINDOW_SHARE * gpu - WINDOW_SLACK:
        return IntegrityCheck("timed-window", "fail", f"{detail}: GPU work ran outside the {timer} timer's "
                                                      "window (on a stream it does not time?)")
    return IntegrityCheck("timed-window", "pass", detail)


def no_work(counts: Sequence[int], flops: float, nbytes: float) -> IntegrityCheck:
    if flops <= 0 and nbytes <= 0:
        return IntegrityCheck("no-work", "not run", "the family counts no flops or bytes")
    if not counts:
        return IntegrityCheck("no-work", "not run", "CUPTI recorded no calls")
    per_call = statistics.median(counts)
    if per_call == 0:
        return IntegrityCheck("no-work", "fail", f"no GPU activity in {sum(1 for c in counts if c == 0)} of "
                                                 f"{len(counts)} calls, though each should do {_work(flops, nbytes)}")
    return IntegrityCheck("no-work", "pass", f"{per_call:g} GPU activities per call")


def _work(flops: float, nbytes: float) -> str:
    parts = [f"{flops:.3g} flops" if flops > 0 else "", f"{nbytes:.3g} bytes" if nbytes > 0 else ""]
    return " and ".join(p for p in parts if p)


def impossible(figure: float, flops: float, nbytes: float, ceilings: Any, l2_bytes: int, cold: bool,
               dtype: str = "float32") -> IntegrityCheck:
    """`ceilings` is a cudabench.measure.ceilings.Ceilings, or None when unknown. Flop rates are held
    to the fp32 FMA peak in float32, to the tensor-core GEMM (with TENSOR_MARGIN) in bf16 / fp16."""
    if flops <= 0 and nbytes <= 0:
        return IntegrityCheck("impossible", "not run", "the family counts no flops or bytes")
    if ceilings is None:
        return IntegrityCheck("impossible", "not run", "this GPU's ceilings are not known")
    if figure <= 0:
        return IntegrityCheck("impossible", "fail", f"a figure of {fmt(figure)} per call")
    problems, seen = [], []
    peak, margin, name = flop_bound(ceilings, dtype)
    if flops > 0 and peak > 0:
        rate = flops / figure
        seen.append(f"{rate / 1e12:.2f} TFLOP/s ({name} {peak / 1e12:.1f})")
        if rate > margin * peak:
            problems.append(f"{rate / 1e12:.1f} TFLOP/s exceeds {margin:.0%} of the {name} "
                            f"{peak / 1e12:.1f} TFLOP/s")
    ceiling, which = _bandwidth(ceilings, nbytes, l2_bytes, cold)
    if nbytes > 0 and ceiling > 0:
        rate = nbytes / figure
        seen.append(f"{rate / 1e9:.0f} GB/s ({which} {ceiling / 1e9:.0f})")
        if rate > BANDWIDTH_MARGIN * ceiling:
            problems.append(f"{rate / 1e9:.0f} GB/s exceeds the {which} bandwidth {ceiling / 1e9:.0f} GB/s")
    if problems:
        return IntegrityCheck("impossible", "fail", "; ".join(problems))
    return IntegrityCheck("impossible", "pass", ", ".join(seen))


def flop_bound(ceilings: Any, dtype: str) -> tuple[float, float, str]:
    """(ceiling flop/s, allowed multiple, its name) for a precision; a ceiling of 0 when unknown."""
    if dtype == "float32":
        return ceilings.fma_flops, FLOP_MARGIN, "fp32 FMA peak"
    tensor = getattr(ceilings, "gemm_flops", lambda _: 0.0)(dtype)
    return tensor, TENSOR_MARGIN, f"{dtype} tensor-core GEMM"


def _bandwidth(ceilings: Any, nbytes: float, l2_bytes: int, cold: bool) -> tuple[float, str]:
    l2 = getattr(ceilings, "l2_bytes_per_s", 0.0)
    if not cold and l2_bytes and nbytes <= l2_bytes and l2 > 0:
        return l2, "L2"
    return ceilings.copy_bytes_per_s, "DRAM copy"


def process_state(patched: Sequence[str], changed: Sequence[str], cold: bool) -> IntegrityCheck:
    if patched:
        return IntegrityCheck("process-state", "fail", f"replaced {', '.join(patched)}, which the timers rely on "
                                                       "(restored for the next subject)")
    persisting = [c for c in changed if c.startswith("persisting-L2")]
    if cold and persisting:
        return IntegrityCheck("process-state", "fail", f"{persisting[0]}: a persisting-L2 carve-out keeps its data "
                                                       "in L2 through the cold-cache flush (reset for the next subject)")
    if changed:
        return IntegrityCheck("process-state", "pass", f"left {', '.join(changed)} (reset for the next subject)")
    return IntegrityCheck("process-state", "pass", "")


def failed_call(name: str, exc: BaseException) -> IntegrityCheck:
    text = str(exc).strip().splitlines()
    return IntegrityCheck(name, "fail", f"the call raised: {text[0] if text else type(exc).__name__}")
