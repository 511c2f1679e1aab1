"""Reading an Nsight Systems report exported to SQLite: kernels (with names from StringIds),
runtime API calls, NVTX ranges, and the GPU time of the kernels launched inside each range
(a runtime call inside the range → its kernel, by correlationId). Pure: sqlite3 only."""

from __future__ import annotations

import bisect
import re
import sqlite3
import statistics
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional

NVTX_DOMAIN_CREATE = 75  # NVTX_EVENTS.eventType of a domain registration (its text is the name)


@dataclass(frozen=True)
class Kernel:
    name: str
    start: int  # ns
    end: int
    correlation: int

    @property
    def duration(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class ApiCall:
    name: str
    start: int
    end: int
    correlation: int
    thread: int


@dataclass(frozen=True)
class Range:
    text: str
    start: int
    end: int
    domain: str
    thread: int


@dataclass(frozen=True)
class Report:
    kernels: tuple[Kernel, ...]
    api_calls: tuple[ApiCall, ...]
    ranges: tuple[Range, ...]


def short_kernel_name(demangled: str) -> str:
    """'void <unnamed>::fwd_vec<(int)8>(const float *, ...)' -> 'fwd_vec<8>' (likewise for
    '(anonymous namespace)::' and other integer template arguments); parameters dropped."""
    name = demangled.replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
    name = re.sub(r"^void\s+", "", name)
    name = re.sub(r"\((?:unsigned )?(?:int|long|short|char|bool)\)(-?\w+)", r"\1", name)
    depth, cut = 0, len(name)
    for i, ch in enumerate(name):  # cut at the parameter list: the first '(' outside template <>
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0 and i > 0:
            cut = i
            break
    return name[:cut]


def _tables(db: sqlite3.Connection) -> set[str]:
    return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in db.execute(f"PRAGMA table_info({table})")}


def read_report(path: Path) -> Report:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        strings = dict(db.execute("SELECT id, value FROM StringIds"))
        tables = _tables(db)
        return without_sleeps(Report(_kernels(db, strings, tables), _api_calls(db, strings, tables),
                                 _ranges(db, strings, tables)))
    finally:
        db.close()


SLEEP_KERNEL = "at::cuda::spin_kernel"  # torch.cuda._sleep: the worker's, queued before each profiled call


def without_sleeps(report: Report) -> Report:
    """The report less the GPU sleeps the worker queues between calls, and their launches: they are
    cudabench's, not the kernel's, and lie outside every call's range."""
    sleeps = {k.correlation for k in report.kernels if k.name == SLEEP_KERNEL}
    if not sleeps:
        return report
    return replace(report, kernels=tuple(k for k in report.kernels if k.correlation not in sleeps),
                   api_calls=tuple(a for a in report.api_calls if a.correlation not in sleeps))


def _kernels(db, strings, tables) -> tuple[Kernel, ...]:
    if "CUPTI_ACTIVITY_KIND_KERNEL" not in tables:
        return ()
    cols = _columns(db, "CUPTI_ACTIVITY_KIND_KERNEL")
    name_col = "demangledName" if "demangledName" in cols else "shortName"
    rows = db.execute(f"SELECT start, end, correlationId, {name_col} FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start")
    return tuple(Kernel(short_kernel_name(strings.get(n, str(n))), s, e, c) for s, e, c, n in rows)


def _api_calls(db, strings, tables) -> tuple[ApiCall, ...]:
    if "CUPTI_ACTIVITY_KIND_RUNTIME" not in tables:
        return ()
    rows = db.execute("SELECT start, end, correlationId, nameId, globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME "
                      "ORDER BY start")
    return tuple(ApiCall(strings.get(n, str(n)), s, e, c, t) for s, e, c, n, t in rows)


def _ranges(db, strings, tables) -> tuple[Range, ...]:
    if "NVTX_EVENTS" not in tables:
        return ()
    cols = _columns(db, "NVTX_EVENTS")
    text_id = "textId" if "textId" in cols else "NULL"
    domain_id = "domainId" if "domainId" in cols else "0"
    rows = list(db.execute(f"SELECT start, end, text, {text_id}, {domain_id}, eventType, globalTid FROM NVTX_EVENTS"))
    domains = {d: (text or strings.get(tid, "")) for _, _, text, tid, d, kind, _ in rows if kind == NVTX_DOMAIN_CREATE}
    out = []
    for start, end, text, tid, dom, kind, thread in rows:
        if end is None or end <= start or kind == NVTX_DOMAIN_CREATE:
            continue
        label = text if text else strings.get(tid, "")
        out.append(Range(label, start, end, domains.get(dom, ""), thread or 0))
    return tuple(sorted(out, key=lambda r: r.start))


# ---- summaries ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TimeStat:
    name: str
    count: int
    total: float  # seconds
    median: float
    min: float
    max: float


def _stat(name: str, durations_ns: list[int]) -> TimeStat:
    s = [d / 1e9 for d in durations_ns]
    return TimeStat(name, len(s), sum(s), statistics.median(s), min(s), max(s))


def kernel_table(report: Report) -> list[TimeStat]:
    """Per kernel name: instances, total, median, min, max; largest total first."""
    by_name: dict[str, list[int]] = {}
    for k in report.kernels:
        by_name.setdefault(k.name, []).append(k.duration)
    return sorted((_stat(n, d) for n, d in by_name.items()), key=lambda t: -t.total)


def gpu_time_in(report: Report, start: int, end: int) -> int:
    """ns of kernels launched by runtime calls (any thread) that began inside [start, end]."""
    starts = [a.start for a in report.api_calls]
    lo, hi = bisect.bisect_left(starts, start), bisect.bisect_right(starts, end)
    launched = {a.correlation for a in report.api_calls[lo:hi]}
    return sum(k.duration for k in report.kernels if k.correlation in launched)


@dataclass(frozen=True)
class RangeStat:
    name: str
    domain: str
    count: int
    wall_total: float  # seconds, summed over instances
    wall_median: float
    gpu_total: float   # kernel time launched inside, summed over instances
    gpu_median: float


def range_table(report: Report) -> list[RangeStat]:
    """Per NVTX range name (and domain): instances, wall time and the GPU time launched inside."""
    groups: dict[tuple[str, str], list[Range]] = {}
    for r in report.ranges:
        groups.setdefault((r.domain, r.text), []).append(r)
    out = []
    for (domain, text), rs in groups.items():
        walls = [(r.end - r.start) / 1e9 for r in rs]
        gpus = [gpu_time_in(report, r.start, r.end) / 1e9 for r in rs]
        out.append(RangeStat(text, domain, len(rs), sum(walls), statistics.median(walls), sum(gpus),
                             statistics.median(gpus)))
    return sorted(out, key=lambda r: -r.wall_total)


@dataclass(frozen=True)
class LaunchStat:
    launches: int
    api_total: float          # seconds in kernel-launch runtime calls
    kernel_total: float       # seconds of kernel execution
    latency_median: Optional[float]  # launch call start -> kernel start


def launch_overhead(report: Report) -> LaunchStat:
    kernels = {k.correlation: k for k in report.kernels}
    launches = [a for a in report.api_calls if "Launch" in a.name]
    latencies = [(kernels[a.correlation].start - a.start) / 1e9 for a in launches if a.correlation in kernels]
    return LaunchStat(
        launches=len(launches),
        api_total=sum(a.end - a.start for a in launches) / 1e9,
        kernel_total=sum(k.duration for k in report.kernels) / 1e9,
        latency_median=statistics.median(latencies) if latencies else None,
    )


def call_timeline(report: Report, suffix: str, calls: int) -> list[dict[str, Any]]:
    """The first `calls` NVTX ranges named '... <suffix>' as a timeline (see results/timeline.py):
    each range as a clock bracket, the launch and synchronize API calls on the host lane, the
    kernels on the GPU lane; µs since the first range began, all in one mode, "profiled"."""
    chosen = [r for r in report.ranges if r.text.endswith(suffix)][:calls]
    if not chosen:
        return []
    begin, end = chosen[0].start, chosen[-1].end

    def span(lane: str, kind: str, start: int, stop: int) -> dict[str, Any]:
        return {"mode": "profiled", "lane": lane, "kind": kind, "start": (start - begin) / 1e3,
                "end": (stop - begin) / 1e3}

    spans = [span("host", "clock", r.start, r.end) for r in chosen]
    for a in report.api_calls:
        kind = "launch" if "Launch" in a.name else "synchronize" if "Synchronize" in a.name else None
        if kind and begin <= a.start <= end:
            spans.append(span("host", kind, a.start, a.end))
    spans += [span("gpu", "kernel", k.start, k.end) for k in report.kernels if begin <= k.start <= end]
    return sorted(spans, key=lambda s: s["start"])
