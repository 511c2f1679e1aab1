"""The records that flow through a run, defined once: plain frozen dataclasses (no torch). Their fields
and type hints are also the results file's format, the worker messages' and the schema a file is
checked against (cudabench.results.records.codec, cudabench.results.records.schema)."""

from __future__ import annotations

import math

from dataclasses import dataclass, field
from typing import Literal, Optional

from cudabench.results.records.codec import blank_as_null, later, written, written_later

DIRECTIONS = ("fwd", "bwd", "fwdbwd")

@dataclass(frozen=True)
class Timing:
    """One timer (cudabench.measure.timers), as every place that names one reads it: suite files and
    the command line (its name, validated against this list), --timing's help (brief), the output's
    timing line (figure) and the tables' median heading (label)."""

    name: str
    brief: str
    figure: str
    label: str


# The one list of timers, in the order --help gives them (the first is the default: engine.request).
TIMINGS = {t.name: t for t in (
    Timing("sync", "wall time per call (two-sided synchronize)",
           "wall time per call: host clock between two torch.cuda.synchronize(), launch included", "median/call"),
    Timing("events", "GPU time (CUDA events)",
           "GPU time per call: CUDA events around the call, launch hidden behind a GPU sleep", "median GPU"),
    Timing("graph", "CUDA-graph replay",
           "GPU time per call from CUDA-graph replays of R calls, each on inputs of its own (no per-call launch "
           "cost; R as many as fit a quarter of the L2)", "median GPU"),
    Timing("cupti", "kernel durations (torch.profiler)",
           "kernel time per call: CUPTI kernel durations (torch.profiler) summed per call", "median kernel"),
)}


def timing_help(default: str) -> str:
    """--timing's help, from the list."""
    return "; ".join(f"{t.name}{' (default)' if t.name == default else ''}: {t.brief}" for t in TIMINGS.values()) + "."


UNTRUSTED = ("INVALID", "ERROR")  # statuses whose figures are kept for the record but are not results
THROTTLE_FRACTION = 0.9  # warn when the SM clock during a run falls below this share of its max


@dataclass(frozen=True)
class Case:
    """One thing to measure: a kernel family at one shape, in one direction."""

    family: str
    shape: tuple[tuple[str, int], ...]
    direction: str = "fwd"
    dtype: str = "float32"
    inputs: str = "uniform"     # the family's input distribution (see Family.input_kinds)

    @property
    def params(self) -> dict[str, int]:
        return dict(self.shape)

    @property
    def shape_text(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.shape)

    @written
    def key(self) -> str:
        """e.g. timex[B=32,C=768,T=768]/fwd; other input kinds and precisions than the defaults are
        named too: timex[B=32,C=768,T=768,rwkv,bfloat16]/fwdbwd."""
        kind = "" if self.inputs == "uniform" else f",{self.inputs}"
        dtype = "" if self.dtype == "float32" else f",{self.dtype}"
        return f"{self.family}[{self.shape_text}{kind}{dtype}]/{self.direction}"


@dataclass(frozen=True)
class Stats:
    n: int
    median: float
    q1: float
    q3: float
    min: float
    max: float
    mean: float
    stdev: float
    ci_low: float = later(math.nan)    # 95 % confidence interval of the median (results/stats.median_interval)
    ci_high: float = later(math.nan)

    @written
    def iqr(self) -> float:
        return self.q3 - self.q1

    @written
    def noise(self) -> float:
        """Relative spread: IQR over median (robust to the odd slow sample)."""
        return self.iqr / self.median if self.median > 0 else float("inf")

    @written_later
    def precision(self) -> float:
        """Half the width of the median's 95 % interval, relative to the median: how well the
        median is known (what the adaptive stop rule targets). NaN where not recorded."""
        return (self.ci_high - self.ci_low) / 2 / self.median if self.median > 0 else math.nan


# NVML's clock event (throttle) reasons that slow the SM below what the kernel would get. Idle, the
# applications-clocks setting and sync boost are not slowdowns of a running kernel.
THROTTLE_REASONS = {0x4: "SW power cap", 0x8: "HW slowdown", 0x20: "SW thermal slowdown",
                    0x40: "HW thermal slowdown", 0x80: "HW power brake"}


def throttle_names(reasons: int) -> list[str]:
    return [name for bit, name in THROTTLE_REASONS.items() if reasons & bit]


@dataclass(frozen=True)
class SampleClocks:
    """The GPU's SM clock and throttle reasons (NVML's bitmask) while a run of consecutive samples was
    taken: the poll reading nearest the end of each of their batches (consecutive batches that took the
    same reading are one run)."""

    first: int                  # the index of the run's first sample, among all samples taken
    count: int
    sm_mhz: float
    reasons: int
    throttled: bool             # a power, thermal or hardware slowdown reason was set


@dataclass(frozen=True)
class Measurement:
    """All samples of one timed subject, in seconds per call, and how they were taken. Samples taken
    while the GPU was throttled are left out of `samples` and kept in `throttled_samples`."""

    samples: tuple[float, ...]
    timing: str                 # sync | events | graph | cupti | a demonstration mode
    warmup_calls: int
    warmup_seconds: float       # the untimed calls before sampling and the timer's preparation (measure.loop)
    stop_reason: str
    cache: str = "hot"          # hot | cold (L2 flushed before each call)
    calls_per_sample: int = 1
    clocks: tuple[tuple[str, float], ...] = ()
    extra: tuple[tuple[str, float], ...] = ()   # mode-specific figures (e.g. per-call launch cost)
    sample_clocks: tuple[SampleClocks, ...] = later(())   # per run of samples under one reading, in order
    throttled_samples: tuple[float, ...] = later(())      # left out of samples: taken while throttled

    @written
    def unit(self) -> str:
        return "seconds per call"


@dataclass(frozen=True)
class Check:
    """Correctness of one subject against the fp64 reference: ‖out − ref‖ / ‖ref‖ per output."""

    errors: tuple[tuple[str, float], ...]
    tolerance: float

    @property
    def worst(self) -> float:
        vals = [e for _, e in self.errors]
        if not vals:
            return float("nan")
        if any(v != v for v in vals):  # NaN: an output was not (fully) written
            return float("nan")
        return max(vals)

    @written
    def passed(self) -> bool:
        w = self.worst
        return w == w and w <= self.tolerance


@dataclass(frozen=True)
class IntegrityCheck:
    """One integrity check of a timed subject (see cudabench.measure.integrity)."""

    name: str                 # fresh-output | stream-order | timed-window | serial-calls | ... (cudabench.measure.integrity)
    verdict: Literal["pass", "fail", "not run"]
    detail: str = ""          # the figures it compared, or why it did not run

    @property
    def failed(self) -> bool:
        return self.verdict == "fail"


@dataclass(frozen=True)
class Result:
    """What happened to one subject (a variant or a baseline) on one case."""

    case: Case
    subject: str
    role: Literal["variant", "baseline"]
    check: Optional[Check] = None
    measurement: Optional[Measurement] = None
    stats: Optional[Stats] = None
    skipped: str = blank_as_null()  # why it was not measured, if it was not
    flops: float = 0.0
    bytes: float = 0.0
    error: str = later("", blank_as_null=True)  # it crashed, hung or raised: the error's own text
    integrity: tuple[IntegrityCheck, ...] = later(())
    host: str = later("")           # where it ran: host name, GPU name, NVML index and UUID
    gpu: str = later("")
    gpu_index: int = later(-1)
    gpu_uuid: str = later("")
    phases: tuple[tuple[str, float], ...] = later(())  # seconds per phase in the worker (measure.subject.PHASES)
    peak_memory: int = later(-1)    # bytes one call allocated beyond what was allocated before it; -1: not measured

    @written
    def status(self) -> Literal["ok", "SKIP", "FAIL", "ERROR", "INVALID"]:
        """ok | SKIP (not run: constraint, build) | FAIL (wrong result) | ERROR (crashed, hung,
        raised) | INVALID (measured, but an integrity check says the figure cannot be trusted)."""
        if self.error:
            return "ERROR"
        if self.skipped:
            return "SKIP" if self.check is None or self.check.passed else "FAIL"
        if self.check is not None and not self.check.passed:
            return "FAIL"  # timed anyway under --force
        if self.invalid_because:
            return "INVALID"
        return "ok"

    @property
    def invalid_because(self) -> str:
        """The failed integrity checks, one clause each ('' when none failed)."""
        return "; ".join(f"{c.name}: {c.detail}" for c in self.integrity if c.failed)

    @property
    def trusted(self) -> bool:
        """Measured and passed every check: the only results that enter speedups and comparisons."""
        return self.status == "ok" and self.stats is not None


@dataclass(frozen=True)
class Environment:
    gpu: str = ""
    gpu_index: int = later(-1)  # NVML's index (nvidia-smi's), whatever CUDA_VISIBLE_DEVICES says
    gpu_uuid: str = later("")
    capability: str = ""
    sm_count: int = 0
    l2_bytes: int = 0
    memory_bytes: int = 0
    driver: str = ""
    cuda_runtime: str = ""
    torch: str = ""
    python: str = ""
    cudabench: str = ""
    hostname: str = ""
    date: str = ""
    settings: tuple[tuple[str, str], ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class RunTime:
    """Where a run's wall time went, beyond each result's own phases: what its `time:` line says."""

    wall: float                                    # seconds, from the command's start to its last result
    gpus: int = 1                                  # the lanes it ran on (its GPU-seconds are wall x gpus)
    waited: tuple[tuple[str, float], ...] = ()     # seconds the lanes waited: start-up, build


def noisy(reason: str) -> bool:
    """True when sampling gave up before the precision target was met."""
    return "> target" in reason


def sm_clock(clocks: dict[str, float]) -> tuple[Optional[float], Optional[float]]:
    """(the SM clock while samples were taken, its maximum) in MHz, from a measurement's clocks."""
    sm = clocks.get("during_sm_mhz_median") or clocks.get("after_sm_mhz")
    top = clocks.get("before_sm_max_mhz") or clocks.get("after_sm_max_mhz")
    return sm or None, top or None


def throttle_warning(clocks: dict[str, float]) -> Optional[str]:
    """A warning when the SM clock seen during the timed region was below 90% of its maximum."""
    sm, top = sm_clock(clocks)
    if not sm or not top or sm >= THROTTLE_FRACTION * top:
        return None
    return (f"SM clock {sm:.0f} MHz during the run is below {THROTTLE_FRACTION:.0%} of its max "
            f"{top:.0f} MHz (power or thermal limit, or another job): times are slower than the GPU can do")
