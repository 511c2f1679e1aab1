"""The tables `cudabench profile` prints: kernel and NVTX-range statistics from a report, Nsight
Compute metrics."""

from __future__ import annotations

from typing import Any, Sequence

from rich.table import Table

from cudabench.profile.nsys_report import short_kernel_name
from cudabench.results.units import fmt_time


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
