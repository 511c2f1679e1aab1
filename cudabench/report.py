"""Rich tables for the terminal. Pure formatting: takes records, returns renderables."""

from __future__ import annotations

import math
from itertools import groupby
from typing import Any, Iterable, Optional, Sequence

from rich.table import Table
from rich.text import Text

from cudabench.clocks import throttle_warning
from cudabench.measure import noisy
from cudabench.model import Environment, Result
from cudabench.nsys_report import short_kernel_name
from cudabench.stats import speedup, throughput


def fmt_time(seconds: Optional[float]) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "-"
    us = seconds * 1e6
    if us < 10:
        return f"{us:.2f} µs"
    if us < 1000:
        return f"{us:.1f} µs"
    if us < 1e6:
        return f"{us / 1e3:.3f} ms" if us < 1e4 else f"{us / 1e3:.2f} ms"
    return f"{seconds:.3f} s"


def fmt_error(value: float) -> str:
    return "NaN" if value != value else f"{value:.1e}"


def environment_line(env: Environment) -> str:
    parts = []
    if env.gpu:
        parts.append(f"{env.gpu} (sm_{env.capability.replace('.', '')}, {env.sm_count} SMs)")
    if env.driver:
        parts.append(f"driver {env.driver}")
    parts.append(f"torch {env.torch} (CUDA {env.cuda_runtime})")
    return " · ".join(parts)


def primary_baseline(results: Sequence[Result]) -> Optional[Result]:
    for r in results:
        if r.role == "baseline" and r.stats is not None:
            return r
    return None


def check_cell(r: Result) -> Text:
    if r.check is None:
        return Text("-", style="dim")
    worst = r.check.worst
    style = "green" if r.check.passed else "bold red"
    label = fmt_error(worst) if r.check.passed else f"FAIL {fmt_error(worst)}"
    return Text(label, style=style)


MEDIAN_LABEL = {"sync": "median/call", "events": "median GPU", "graph": "median GPU",
                "cupti": "median kernel"}


def kernel_time(r: Result) -> Optional[float]:
    if r.measurement is None:
        return None
    return dict(r.measurement.extra).get("kernel_time_cupti")


def comparable(base: Result, r: Result) -> tuple[float, float]:
    kb, kr = kernel_time(base), kernel_time(r)
    return (kb, kr) if kb and kr else (base.stats.median, r.stats.median)


def results_table(results: Sequence[Result], title: str) -> Table:
    """One table for one family at one shape: a row per subject and direction."""
    table = Table(title=title, title_justify="left", header_style="bold")
    timings = {r.measurement.timing for r in results if r.measurement}
    median_label = MEDIAN_LABEL.get(next(iter(timings)), "median") if len(timings) == 1 else "median"
    with_kernel = any(kernel_time(r) is not None for r in results)
    columns = [("dir", "left"), ("kernel", "left"), ("rel err", "right"), (median_label, "right"),
               ("IQR", "right"), ("min", "right"), ("n", "right")]
    columns += [("kernel (CUPTI)", "right")] if with_kernel else []
    columns += [("TFLOP/s", "right"), ("GB/s", "right"), ("speedup", "right")]
    for col, justify in columns:
        table.add_column(col, justify=justify)
    for direction, group in groupby(results, key=lambda r: r.case.direction):
        rows = list(group)
        base = primary_baseline(rows)
        for r in rows:
            name = Text(r.subject, style="cyan" if r.role == "baseline" else "")
            if r.stats is None:
                blanks = [""] * (len(columns) - 4)
                table.add_row(direction, name, check_cell(r), Text(r.status, style="yellow"), *blanks)
                continue
            s = r.stats
            # throughput from the kernel time when the per-call figure is mostly launch; speedup
            # from kernel times only when both sides have one
            t = kernel_time(r) or s.median
            vs = f"{speedup(*comparable(base, r)):.2f}×" if base else "-"
            tflops = throughput(r.flops, t) / 1e12
            gbs = throughput(r.bytes, t) / 1e9
            cells = [direction, name, check_cell(r), fmt_time(s.median), f"{s.noise:.1%}", fmt_time(s.min),
                     str(s.n)]
            cells += [fmt_time(kernel_time(r))] if with_kernel else []
            cells += [f"{tflops:.2f}" if tflops else "-", f"{gbs:.0f}" if gbs else "-", vs]
            table.add_row(*cells)
    return table


def tables(results: Iterable[Result]) -> list[Table]:
    """Group results by family and shape (keeping run order) and make a table for each."""
    out = []
    ordered = list(results)
    keys = list(dict.fromkeys((r.case.family, r.case.shape_text) for r in ordered))
    for family, shape in keys:
        rows = [r for r in ordered if (r.case.family, r.case.shape_text) == (family, shape)]
        rows.sort(key=lambda r: (r.case.direction != "fwd", r.case.direction))
        base = primary_baseline(rows)
        title = f"{family}  {shape}  float32" + (f"  ·  speedup vs {base.subject}" if base else "")
        out.append(results_table(rows, title))
    return out


def notes(results: Sequence[Result]) -> list[str]:
    """Lines under the tables: skips, kernel time versus per-call cost, and warnings."""
    lines = []
    for r in results:
        who = f"{r.subject} {r.case.direction}"
        if r.skipped:
            lines.append(f"{who}: {r.skipped}")
        if r.measurement is None or r.stats is None:
            continue
        k = kernel_time(r)
        if k is not None:
            lines.append(f"{who}: {fmt_time(r.stats.median)} per call is mostly launch and synchronisation; "
                         f"the GPU kernels run {fmt_time(k)} (CUPTI). Throughput and speedup use the kernel time.")
        if noisy(r.measurement.stop_reason):
            lines.append(f"warning: {who}: {r.measurement.stop_reason}: single calls vary that much; the median "
                         f"of {r.stats.n} samples is reported (GPU-side timers, --timing events or graph, "
                         "vary less than wall time per call)")
        warning = throttle_warning(dict(r.measurement.clocks))
        if warning:
            lines.append(f"warning: {who}: {warning}")
    return lines


def stop_summary(results: Sequence[Result]) -> str:
    reasons = [r.measurement.stop_reason for r in results if r.measurement]
    met = sum(1 for x in reasons if not noisy(x))
    return f"sampling: {met} of {len(reasons)} subjects reached the noise target" if reasons else ""


# ---- compare-sync-modes ------------------------------------------------------------------------------

def sync_modes_table(results: Sequence[Any]) -> Table:
    table = Table(title="synchronize placements and timers", title_justify="left", header_style="bold")
    for col, justify in [("mode", "left"), ("1st iter", "right"), ("median (rest)", "right"),
                         ("valid measurement", "left"), ("what the figure contains", "left")]:
        table.add_column(col, justify=justify, no_wrap=col != "what the figure contains")
    for r in results:
        valid = Text("yes", style="green") if r.valid else Text("no", style="bold red")
        table.add_row(r.name, fmt_time(r.first), fmt_time(r.rest_median), valid, r.contains)
    return table


def bar(value: float, top: float, width: int = 18) -> str:
    """A horizontal bar of `value` on a scale where `top` fills `width` cells (eighth-cell steps)."""
    if top <= 0 or value != value:
        return ""
    eighths = round(8 * width * min(value, top) / top)
    full, part = divmod(eighths, 8)
    return "█" * full + ("▏▎▍▌▋▊▉"[part - 1] if part else "") or "▏"


def iteration_view(results: Sequence[Any], show: int) -> Table:
    """The first `show` iterations of each placement as bars on one scale."""
    shown = [r.samples[:show] for r in results]
    top = max(max(s) for s in shown)
    table = Table(title=f"first {show} iterations (one scale: a full bar = {fmt_time(top)})",
                  title_justify="left", header_style="bold")
    table.add_column("iter", justify="right")
    for r in results:
        table.add_column(r.name, no_wrap=True)
    for i in range(max(len(s) for s in shown)):
        cells = [f"{bar(s[i], top)} {fmt_time(s[i])}" if i < len(s) else "" for s in shown]
        table.add_row(str(i + 1), *cells)
    return table


# ---- profile -----------------------------------------------------------------------------------------

def time_stat_table(title: str, stats: Sequence[Any], first: str = "kernel") -> Table:
    table = Table(title=title, title_justify="left", header_style="bold")
    for col in (first, "instances", "total", "median", "min", "max"):
        table.add_column(col, justify="left" if col == first else "right")
    for s in stats:
        table.add_row(s.name, str(s.count), fmt_time(s.total), fmt_time(s.median), fmt_time(s.min), fmt_time(s.max))
    return table


def range_stat_table(stats: Sequence[Any]) -> Table:
    table = Table(title="NVTX ranges (GPU time = kernels launched inside the range)", title_justify="left",
                  header_style="bold")
    for col in ("range", "domain", "instances", "wall total", "wall median", "GPU total", "GPU median"):
        table.add_column(col, justify="left" if col in ("range", "domain") else "right")
    for s in stats:
        table.add_row(s.name, s.domain or "-", str(s.count), fmt_time(s.wall_total), fmt_time(s.wall_median),
                      fmt_time(s.gpu_total), fmt_time(s.gpu_median))
    return table


def ncu_table(rows: Sequence[Any], titles: dict) -> Table:
    table = Table(title="Nsight Compute (clocks not locked: --clock-control none)", title_justify="left",
                  header_style="bold")
    table.add_column("kernel")
    for title in titles.values():
        table.add_column(title, justify="right")
    for r in rows:
        cells = [fmt_time(r.seconds()) if m == "gpu__time_duration.sum" else r.cell(m) for m in titles]
        table.add_row(short_kernel_name(r.kernel), *cells)
    return table
