"""`cudabench workers`: this user's warm workers (cudabench.engine.warm), one per GPU that ran
something recently: GPU, pid, age, idle time, runs served and the families loaded; `--stop` ends them."""

from __future__ import annotations

import time

import typer
from rich.table import Table

from cudabench.cli.common import out, say


def workers_cmd(stop: bool = typer.Option(False, "--stop", help="Stop every warm worker of this user (each "
                                                                "finishes the run it serves first).")) -> None:
    """Show this user's warm workers, or stop them."""
    from cudabench.engine.warm_client import stop_workers, warm_workers, worker_folder

    if stop:
        stopped = stop_workers()
        say(f"stopped {len(stopped)} warm worker(s)" + (": " + ", ".join(
            f"pid {pid}" + (" (after the run it serves)" if busy else "") for pid, busy in stopped) if stopped else ""))
        return
    found = warm_workers()
    if not found:
        say(f"no warm workers (their sockets live in {worker_folder()})")
        return
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("GPU", "pid", "age", "idle", "exits after", "runs", "loaded"):
        table.add_column(column)
    now = time.time()
    for _, info in found:
        busy = info.get("busy")
        table.add_row(info.get("gpu") or "(not started)", str(info["pid"]), _span(now - info["started"]),
                      "serving a run" if busy else _span(info["idle"]),
                      "-" if busy else _span(max(0.0, info["idle_limit"] - info["idle"])), str(info["runs"]),
                      ", ".join(info["loaded"]) or "-")
    out.print(table)
    say(f"sockets in {worker_folder()} (0600, this user only); `cudabench workers --stop` ends them", style="dim")


def _span(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
