"""Integrity checks: whether a timed figure can be trusted, whatever the kernel did to look fast.
Each returns an IntegrityCheck (pass, fail or not run, with the figures behind the verdict); any
failure makes the subject INVALID.

    fresh-output   after the hot loop, timed calls on input values the judge wrote into the
                   subject's inputs just before each; a few of them, chosen in secret, must match a
                   new fp64 reference (a result cached by pointer, shape or content, or work done
                   only on calls it believes are checked, returns the wrong answer)
    fresh-inputs   those calls on new values must not be slower than those on the same values
                   written again, beyond the noise (a figure that depends on its inputs staying the
                   same, in full or in part)
    hot-loop       the hot loop must not beat the judged calls on the same values beyond the noise
                   (a subject that behaves differently when it is not checked)
    determinism    one of those calls repeats the first inputs: its outputs must equal the first
                   check's bit for bit, or within the nondeterminism the subject declares (atomics);
                   output memory is poisoned with new random values each time, so an output that
                   reads uninitialised or unwritten memory differs
    distribution   one of those calls draws its values from another input kind (outliers, constant, ...)
                   and must match its fp64 reference too (a kernel tuned to one distribution)
    output         every output a plain dense tensor of the case's dtype, on its device, sharing
                   no memory with an input (a lazy subclass, a view of an input, the wrong dtype)
    inputs         the inputs hold, after a call, the values the judge wrote before it
    stream-order   with PyTorch's current stream held busy, the original inputs are written back
                   on it and the call is made and its outputs copied on it; the copies must match
                   the reference (work on a private stream reads the inputs too early or is read
                   before it is done)
    timed-window   the GPU time CUPTI sees per call (any stream, overlaps counted once) must not
                   exceed the timer's figure beyond noise (work that escaped the timed stream)
    serial-calls   (graph timing, several calls a replay) the figure per call must not beat the GPU
                   busy time of one call alone, made eager on new values and checked, beyond noise
                   (calls of a replay that overlap: side streams in the capture, or one kernel
                   launched by one call over every call's memory)
    no-work        a call of a family that counts flops or bytes must record GPU activity
    impossible     the figure must not imply more FLOP/s than the fp32 FMA peak or more bytes/s than
                   the bandwidth ceiling that applies (DRAM when the working set exceeds L2, or
                   the cache is flushed; the measured L2 bandwidth otherwise)
    process-state  the call must not replace the functions the timers rely on, nor set tracing
                   hooks, nor leave a persisting-L2 carve-out behind under --cold (all fake the figure)
    threads        no thread the subject started (Python's, or any Linux lists) may still run after it
                   (work that goes on after its calls returned)
    processes      no process the subject started may run while it is timed, nor be left running:
                   its work is in none of CUPTI's records of the subject process (processes.py)
"""

from __future__ import annotations

import statistics
from typing import Any, Callable, Optional, Sequence

from cudabench.measure import processes
from cudabench.results.records.model import Check, IntegrityCheck

WINDOW_SHARE = 0.8          # the timer may see down to this share of CUPTI's busy time (noise)
WINDOW_SLACK = 2e-6         # ... minus this many seconds (profiler timestamp granularity)
# A graph figure per call may be down to this share of one call alone's GPU busy time, minus this slack
# (seen on the H100: figure / call alone 0.94 to 1.21 over 15 honest subjects; docs/benchmarks/h100-timing-truth.md)
SERIAL_SHARE = 0.8
SERIAL_SLACK = 0.1e-6
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
FRESH_WHAT = "on a timed call with fresh input values, chosen at random among the timed calls, the output was " \
             "wrong (a result cached by pointer, shape or content, or work done only on calls it took for checked?)"
ORDER_WHAT = "with PyTorch's current stream busy, its outputs did not reflect the inputs written on that stream " \
             "(work launched on another stream, not ordered with the current one?)"


def timed_window(figure: float, busy: Sequence[float], timer: str) -> IntegrityCheck:
    return _held_to_busy("timed-window", figure, busy, WINDOW_SHARE, WINDOW_SLACK, "CUPTI recorded no calls",
                         lambda gpu: f"timer {fmt(figure)} per call, GPU busy {fmt(gpu)} per call (CUPTI)",
                         f"GPU work ran outside the {timer} timer's window (on a stream it does not time?)")


def serial_calls(figure: float, busy: Sequence[float], calls: int) -> IntegrityCheck:
    """The graph figure per call against the GPU busy time of one call alone (CUPTI, eager calls on
    new values, each checked)."""
    return _held_to_busy("serial-calls", figure, busy, SERIAL_SHARE, SERIAL_SLACK, "no call alone could be checked",
                         lambda alone: f"{fmt(figure)} per call in a replay of {calls}, one call alone keeps the "
                                       f"GPU busy {fmt(alone)} (CUPTI)",
                         "the calls of a replay overlap or share their work (side streams in the capture, or one "
                         "kernel over every call?)")


def _held_to_busy(name: str, figure: float, busy: Sequence[float], share: float, slack: float, none: str,
                  describe: Callable[[float], str], why: str) -> IntegrityCheck:
    """A figure that may not fall below `share` of CUPTI's median busy time per call, minus `slack`."""
    if not busy:
        return IntegrityCheck(name, "not run", none)
    gpu = statistics.median(busy)
    if figure < share * gpu - slack:
        return IntegrityCheck(name, "fail", f"{describe(gpu)}: {why}")
    return IntegrityCheck(name, "pass", describe(gpu))


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
    """The bandwidth a call's bytes are held to: within L2 when they fit there and the cache is hot.
    When the L2 ceiling could not be measured such a call has no known bound (0), never the DRAM
    copy's, which an honest hot-L2 kernel beats."""
    if not cold and l2_bytes and nbytes <= l2_bytes:
        return getattr(ceilings, "l2_bytes_per_s", 0.0), "L2"
    return ceilings.copy_bytes_per_s, "DRAM copy"


def process_state(patched: Sequence[str], changed: Sequence[str], cold: bool, lasting: Sequence[str] = ()) -> IntegrityCheck:
    left = [f"left {', '.join(lasting)}, which its process cannot undo"] if lasting else []  # a new process next
    replaced = [f"replaced {', '.join(patched)}, which the timers or a later subject rely on (restored for the next "
                "subject)"] if patched else []
    if left or replaced:
        return IntegrityCheck("process-state", "fail", "; ".join(left + replaced))
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


NOISE_CAP = 0.05  # a call's own spread widens the allowance by at most twice this


def times(a: float, b: float) -> str:
    """How many times `a` is `b`, as a reader sees it (a zero `b`: a call that recorded no kernel)."""
    return f"{a / b:.2f}x" if b > 0 else "infinitely"


def _slower(base: Any, other: Any, slack: float, absolute: float, noise: float) -> bool:
    """Whether `other`'s median (Stats) exceeds `base`'s by more than `slack` of it, twice the call's
    own spread `noise` (IQR / median of the hot loop's many samples: a handful of judged calls are too
    few for an interval of their own; capped, so a noisy subject gains little room) and `absolute`
    seconds."""
    return other.median > base.median * (1 + slack + 2 * min(noise, NOISE_CAP)) + absolute


def fresh_inputs(same: Any, new: Any, slack: float, absolute: float, noise: float = 0.0) -> IntegrityCheck:
    """Judged calls on new input values (`new`) against judged calls on the same values written
    again (`same`), made alike in every other way."""
    detail = f"judged calls on new inputs {fmt(new.median)}, on the same inputs {fmt(same.median)} per call " \
             f"({new.n} + {same.n} calls)"
    if _slower(same, new, slack, absolute, noise):
        return IntegrityCheck("fresh-inputs", "fail", f"{detail}: {times(new.median, same.median)} slower on new "
                                                      "input values, beyond the noise (its time depends on its "
                                                      "inputs staying the same, in full or in part)")
    return IntegrityCheck("fresh-inputs", "pass", detail)


def hot_loop(hot: Any, same: Any, slack: float, absolute: float) -> IntegrityCheck:
    """The hot loop's figure against judged calls on the same input values."""
    detail = f"hot loop {fmt(hot.median)}, judged calls on the same inputs {fmt(same.median)} per call"
    if _slower(hot, same, slack, absolute, hot.noise):
        return IntegrityCheck("hot-loop", "fail", f"{detail}: the hot loop is {times(same.median, hot.median)} "
                                                  "faster than judged calls of the same work, beyond the noise "
                                                  "(it behaves differently when it is not checked)")
    return IntegrityCheck("hot-loop", "pass", detail)


def distribution(kind: Optional[str], check: Optional[Check], why_not: str, tolerance: float,
                 summed: float) -> IntegrityCheck:
    """The judged call on another input kind: right on it too, or tuned to one distribution. `tolerance`:
    the family's, said beside the call's own where it was widened: to `summed` for sums of equal terms
    (kinds.held_to), beyond it for what rounding errs on the draw (kinds.rounding_allowance)."""
    if kind is None:
        return IntegrityCheck("distribution", "not run", why_not)
    if check is None:
        return IntegrityCheck("distribution", "not run", f"the call on {kind} inputs could not be read")
    why = "what its kernels' rounding errs on this draw" if check.tolerance > summed else "a float32 sum of equal terms"
    widened = (f" (tolerance {check.tolerance:.3g}, widened from the family's {tolerance:g} for {why})"
               if check.tolerance > tolerance else "")
    if check.passed:
        return IntegrityCheck("distribution", "pass", f"right on {kind} inputs too (drawn at random), "
                                                      f"error {check.worst:.1e}{widened}")
    return IntegrityCheck("distribution", "fail", f"wrong on {kind} inputs (drawn at random): error "
                                                  f"{check.worst:.3g} > tolerance {check.tolerance:.3g}{widened} "
                                                  "(tuned to one input distribution?)")


def determinism(first: dict, again: dict, allowed: float) -> IntegrityCheck:
    """Two calls on the same input values: bit-identical outputs, or a relative difference within
    `allowed` (a subject that sums with atomics declares it)."""
    import torch

    worst, different = 0.0, []
    for name, a in first.items():
        b = again.get(name)
        if b is None or a.shape != b.shape:
            different.append(f"{name} missing or reshaped")
            continue
        same = torch.equal(a, b) or bool((torch.eq(a, b) | (torch.isnan(a) & torch.isnan(b))).all())
        if same:
            continue
        scale = float(torch.linalg.vector_norm(a.double()))
        diff = float(torch.linalg.vector_norm(a.double() - b.double()))
        rel = diff / scale if scale > 0 else diff
        worst = max(worst, rel if rel == rel else float("inf"))
        if not rel <= allowed:
            different.append(f"{name} differs by {rel:.2g}")
    if different:
        limit = f"declared nondeterminism {allowed:g}" if allowed else "bit-identical expected"
        return IntegrityCheck("determinism", "fail", f"the same inputs twice gave different outputs: "
                                                     f"{', '.join(different)} ({limit}; reads uninitialised "
                                                     "or unwritten memory?)")
    return IntegrityCheck("determinism", "pass", "bit-identical" if worst == 0 else f"within {worst:.1e}")


DENSE_KINDS = {"tensor"}


def output_kind(name: str, meta: dict, dtype: str, device: str) -> str:
    """Why an output as the subject process described it is not a plain dense tensor of the case
    ('' when it is)."""
    kind = meta.get("kind", "?")
    if kind not in DENSE_KINDS:
        return f"{name} is a {kind}, not a plain tensor"
    if meta.get("layout") != "torch.strided":
        return f"{name} has layout {meta.get('layout')}, not a dense tensor"
    if meta.get("device") != device:
        return f"{name} is on {meta.get('device')}, not {device}"
    if meta.get("dtype") != dtype:
        return f"{name} has dtype {meta.get('dtype')}, the case is {dtype}"
    shape, stride = list(meta.get("shape", [])), list(meta.get("stride", []))
    if not dense(shape, stride):
        return f"{name} has strides {stride}, not a dense tensor of shape {shape} (gaps or overlaps)"
    return ""


def dense(shape: list[int], stride: list[int]) -> bool:
    """Whether the elements cover their memory exactly once, in some order of the dimensions (a
    transposed layout, as PyTorch's own attention backwards return, is dense; every other element
    of a larger buffer is not)."""
    if len(shape) != len(stride):
        return False
    if any(n == 0 for n in shape):
        return True
    step = 1
    for n, s in sorted(((n, s) for n, s in zip(shape, stride) if n > 1), key=lambda d: d[1]):
        if s != step:
            return False
        step *= n
    return True


def threads_left(names: Sequence[str], trusted: bool = False) -> IntegrityCheck:
    """Python threads the subject's own code started that still run. A baseline is the task's own
    code (its family's spec.py), so what it leaves (torch.compile's worker threads) is only noted."""
    if names and trusted:
        return IntegrityCheck("threads", "pass", f"left {', '.join(names)} (a baseline: the task's own code)")
    if names:
        return IntegrityCheck("threads", "fail", f"left host threads running after its calls: {', '.join(names)} "
                                                 "(work that goes on after a call returned is not timed)")
    return IntegrityCheck("threads", "pass", "")


def processes_left(seen: dict[int, str], trusted: bool = False, error: str = "") -> IntegrityCheck:
    """Processes the subject started that ran while it was timed or were still running before it was
    (cudabench.measure.processes). A baseline's are only noted, as its threads are."""
    if error:
        return IntegrityCheck("processes", "fail", f"its processes could not be watched ({error})")
    blind = " (double-forked processes are not seen here: the judge could not become a child subreaper)" \
        if processes.SUBREAPER is False else ""
    if not seen:
        return IntegrityCheck("processes", "pass", blind.strip(" ()"))
    listed = "; ".join(seen.values())
    if trusted:
        return IntegrityCheck("processes", "pass", f"started {listed} (a baseline: the task's own code){blind}")
    return IntegrityCheck("processes", "fail", f"started processes of its own that ran while it was timed: {listed} "
                                               "(work done in another process is in no timer's window; ended)")
