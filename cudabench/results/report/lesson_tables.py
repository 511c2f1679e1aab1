"""Rich tables of the lessons: compare-sync-modes (each way of timing one call, and the first
iterations drawn as bars) and compare-transfer (host-to-device copies, and overlap with a kernel)."""

from __future__ import annotations

from typing import Any, Sequence

from rich.table import Table
from rich.text import Text

from cudabench.results.units import fmt_decimal_bytes, fmt_time


def sync_modes_table(results: Sequence[Any]) -> Table:
    table = Table(title="synchronize placements and timers", title_justify="left", header_style="bold")
    for col, justify in [("mode", "left"), ("1st iter", "right"), ("median (rest)", "right"),
                         ("valid measurement", "left"), ("what the figure contains", "left")]:
        table.add_column(col, justify=justify, no_wrap=col != "what the figure contains")
    for r in results:
        valid = Text("yes", style="green") if r.valid else Text("no", style="bold red")
        table.add_row(r.name, fmt_time(r.first), fmt_time(r.rest_median), valid, r.contains)
    return table


def transfer_table(copies: Sequence[Any]) -> Table:
    """compare-transfer: one row per size, source, non_blocking and method; GB/s against the link's
    measured peak (the fastest valid figure); invalid methods marked."""
    peak = max((c.gbps for c in copies if c.valid), default=0.0)
    table = Table(title=f"host → device copies (link peak measured here: {peak:.1f} GB/s)", title_justify="left",
                  header_style="bold")
    for col in ("size", "from", "non_blocking", "method", "median", "GB/s", "% of link", "valid"):
        table.add_column(col, justify="right" if col in ("size", "median", "GB/s", "% of link") else "left")
    for c in copies:
        share = f"{c.gbps / peak:.0%}" if peak and c.valid else "-"
        verdict = Text("yes", style="green") if c.valid else Text("NO: the copy may still be running",
                                                                  style="bold red")
        table.add_row(fmt_decimal_bytes(c.size), "pinned" if c.pinned else "pageable", str(c.non_blocking), c.method,
                      fmt_time(c.median), f"{c.gbps:.1f}", share, verdict)
    return table


def overlap_table(o: Any) -> Table:
    """compare-transfer: the next batch's copy and a kernel, one after the other and overlapped."""
    import statistics

    seq, both = statistics.median(o.sequential), statistics.median(o.overlapped)
    table = Table(title=f"overlap: copy {fmt_decimal_bytes(o.size)} (pinned, non_blocking) {fmt_time(o.copy)} and "
                        f"{o.kernel_name} {fmt_time(o.kernel)} (wall time, synchronized host clock)",
                  title_justify="left", header_style="bold")
    for col in ("schedule", "median wall", "saved"):
        table.add_column(col, justify="left" if col == "schedule" else "right")
    table.add_row("one stream: copy, then kernel", fmt_time(seq), "-")
    table.add_row("copy on a second stream during the kernel", fmt_time(both), f"{1 - both / seq:.0%}")
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


