"""Running a profile request end to end and printing what the tool found (nsys: kernels, NVTX
ranges, launch overhead; ncu: metrics per kernel; torch: kernels and the Chrome trace)."""

from __future__ import annotations

import statistics
import subprocess
import sys
from typing import Callable, Optional

from rich.text import Text

from cudabench.console import PlainConsole
from cudabench.profile import ncu as ncu_tool
from cudabench.profile import nsys as nsys_tool
from cudabench.profile import nsys_report, tables
from cudabench.results.units import fmt_time
from cudabench.errors import CudabenchError
from cudabench.nvtx import CALL_SUFFIX
from cudabench.profile.nsys import with_ext
from cudabench.tools import verified
from cudabench.profile.launch import OUTPUTS, ProfileRequest, child_command, child_env, keep_summary, read_summary

RunChild = Callable[..., tuple[int, str, Optional[dict]]]


def profile_and_report(req: ProfileRequest, nsys_path: Optional[str], out: PlainConsole, err: PlainConsole,
                       run_child: RunChild) -> None:
    """`run_child(command, env, echo)` runs the tool and its worker and returns (exit code, log, the
    worker's reply or None): the engine's one-shot worker, with its watchdog."""
    tool_path = find_profiler(req.tool, nsys_path, out, err)
    req.out_dir.mkdir(parents=True, exist_ok=True)
    for ext in OUTPUTS:  # never read an earlier run's report as this one's
        with_ext(req.base, ext).unlink(missing_ok=True)
    command = child_command(req, tool_path)
    env, why = child_env(req, tool_path)
    out.print(f"$ {' '.join(command)}", style="dim", soft_wrap=True)  # whole, to copy
    if why:
        out.print(f"NVTX ranges through torch.cuda.nvtx: {why}.", style="dim")
    rc, log, reply = run_child(command, env, lambda line: print(f"│ {line}", file=sys.stderr, flush=True))
    if reply is not None and reply.get("type") == "profile":
        keep_summary(req, reply["summary"])
    if req.tool == "nsys":
        report_nsys(req, tool_path, rc, log, reply, out)
    elif req.tool == "ncu":
        report_ncu(req, tool_path, rc, log, reply, out)
    else:
        report_torch(req, rc, log, reply, out)


def find_profiler(tool: str, nsys_path: Optional[str], out: PlainConsole, err: PlainConsole) -> Optional[str]:
    """The nsys or ncu binary to run (None for torch), printed with where it was found."""
    if tool not in ("nsys", "ncu"):
        return None
    found = nsys_tool.find_nsys(nsys_path) if tool == "nsys" else ncu_tool.find_ncu()
    found = verified(found, tool, f"Point {'--nsys or $CUDABENCH_NSYS' if tool == 'nsys' else '$CUDABENCH_NCU'} "
                     f"(or PATH) at the real {tool}.")
    out.print(f"{tool}: {found.describe()}", style="dim")
    if tool == "nsys" and not nsys_tool.importer_present(found.path):
        err.print(Text.assemble(("note: ", "yellow"), f"no QdstrmImporter beside {found.path}: this nsys "
                                "may only be able to write a .qdstrm."))
    return found.path


def agreement_line(what: str, per_call: float, summary: dict) -> str:
    """The profiler's kernel time per call against cudabench's events: on the same captured calls,
    less what an empty event pair measures, where the worker timed them (nsys); else the events
    figure from before the capture."""
    if "captured_events_median" not in summary:
        ref = summary["events_median"]
        return (f"{what} per call {fmt_time(per_call)} vs cudabench events (GPU time) "
                f"{fmt_time(ref)}: {abs(per_call / ref - 1):.1%} apart")
    ref, own = summary["captured_events_median"], summary.get("events_overhead", 0.0)
    return (f"{what} per call {fmt_time(per_call)} vs cudabench events on the same calls {fmt_time(ref)} "
            f"less {fmt_time(own)} that an empty event pair measures: {abs(per_call / (ref - own) - 1):.1%} apart")


def capture_cost_line(summary: dict) -> Optional[str]:
    """Said when the capture itself changed the call's events figure by more than 2 %."""
    during, before = summary.get("captured_events_median"), summary["events_median"]
    if during is None or abs(during / before - 1) <= 0.02:
        return None
    return (f"note: the profiler's tracing changed the call itself: events {fmt_time(before)} per call before "
            f"the capture, {fmt_time(during)} during it ({during / before - 1:+.1%}); `cudabench run` "
            "times it with no profiler attached.")


def report_nsys(req: ProfileRequest, nsys: str, rc: int, log: str, reply: Optional[dict], out: PlainConsole) -> None:
    rep = nsys_tool.check_report(req.base, nsys, log)
    summary = read_summary(rc, log, reply)
    _, _, sqlite = nsys_tool.report_paths(req.base)
    exported = subprocess.run(nsys_tool.export_command(nsys, rep, sqlite), capture_output=True, text=True)
    if exported.returncode != 0 or not sqlite.is_file():
        raise CudabenchError(f"nsys export to SQLite failed: {nsys_tool.last_line(exported.stdout + exported.stderr)}")
    data = nsys_report.read_report(sqlite)
    out.print_table(tables.time_stat_table(f"kernels ({req.kernel}, {req.iters} calls)", nsys_report.kernel_table(data)))
    ranges = nsys_report.range_table(data)
    if ranges:
        out.print_table(tables.range_stat_table(ranges))
    else:
        out.print(Text.assemble(("no NVTX ranges in the report", "yellow"), " (the nvtx package's ranges are "
                                "not recorded by this nsys; set CUDABENCH_NVTX_BACKEND=torch)"))
    launch = nsys_report.launch_overhead(data)
    if launch.launches:
        latency = fmt_time(launch.latency_median) if launch.latency_median is not None else "-"
        out.print(f"launch overhead: {launch.launches} launches, {fmt_time(launch.api_total)} in launch "
                  f"API calls ({fmt_time(launch.api_total / launch.launches)} each) for "
                  f"{fmt_time(launch.kernel_total)} of kernels; median launch→start latency {latency}"
                  + (" (each call queued behind a GPU sleep, as events time it)" if "captured_events_median" in summary else ""))
    calls = [r for r in ranges if r.name.endswith(CALL_SUFFIX)]
    per_call = calls[0].gpu_median if calls else launch.kernel_total / req.iters
    out.print(agreement_line("nsys kernel time", per_call, summary))
    cost = capture_cost_line(summary)
    if cost:
        out.print(Text(cost, style="yellow"))
    out.print(f"report: {rep}\nsqlite: {sqlite}", soft_wrap=True)  # paths whole, to copy
    if req.timeline:
        draw_timeline(req, data, summary, out)


TIMELINE_CALLS = 3  # calls drawn by profile --timeline: enough to see the pattern, few enough to read


def draw_timeline(req: ProfileRequest, data: nsys_report.Report, summary: dict, out: PlainConsole) -> None:
    """The first profiled calls from the nsys report: NVTX call ranges, launch and synchronize API
    calls on the host, kernels on the GPU."""
    from cudabench.results.plots.timeline import plot_timeline

    spans = nsys_report.call_timeline(data, CALL_SUFFIX, TIMELINE_CALLS)
    if not spans:
        raise CudabenchError("no NVTX call ranges in the nsys report, so there is no timeline to draw.",
                             "Set CUDABENCH_NVTX_BACKEND=torch if this nsys does not record the nvtx package's ranges.")
    heading = (f"{req.kernel}: {TIMELINE_CALLS} of {req.iters} profiled calls; cudabench events median "
               f"{summary['events_median'] * 1e6:.1f} µs per call; brackets: the NVTX range around call + "
               "synchronize", True)
    title = (f"{req.kernel} at {req.shape or 'its default shape'} ({req.direction}) under Nsight Systems\n"
             "host lane: NVTX call ranges (brackets), launch and synchronize API calls; GPU lane: kernels")
    path = plot_timeline(spans, {"profiled": heading}, title, req.timeline, "µs since the first call began")
    out.print(f"wrote {path}")


def report_ncu(req: ProfileRequest, ncu: str, rc: int, log: str, reply: Optional[dict], out: PlainConsole) -> None:
    summary = read_summary(rc, log, reply)
    rep = with_ext(req.base, ".ncu-rep")
    if not rep.is_file():
        raise CudabenchError(f"ncu wrote no report ({nsys_tool.last_line(log)}).",
                             "Nsight Compute needs access to the GPU's performance counters.")
    imported = subprocess.run(ncu_tool.import_command(ncu, rep), capture_output=True, text=True)
    rows = ncu_tool.parse_raw_csv(imported.stdout)
    if imported.returncode != 0 or not rows:
        raise CudabenchError(f"ncu could not read back {rep}: {nsys_tool.last_line(imported.stdout + imported.stderr)}")
    (with_ext(req.base, ".ncu.csv")).write_text(imported.stdout)
    out.print_table(tables.ncu_table(rows, ncu_tool.METRICS))
    durations = [r.seconds() for r in rows if r.seconds()]
    if durations:
        out.print(agreement_line("ncu kernel time", sum(durations) / req.iters, summary)
                  + " (ncu replays each kernel; caches are flushed between passes)")
    out.print(f"report: {rep}\ncsv: {with_ext(req.base, '.ncu.csv')}", soft_wrap=True)


def report_torch(req: ProfileRequest, rc: int, log: str, reply: Optional[dict], out: PlainConsole) -> None:
    summary = read_summary(rc, log, reply)
    pairs = summary["kernels"]
    by_name: dict[str, list[float]] = {}
    for name, seconds in pairs:
        by_name.setdefault(nsys_report.short_kernel_name(name), []).append(seconds)
    stats = sorted((nsys_report.TimeStat(n, len(d), sum(d), statistics.median(d), min(d), max(d))
                    for n, d in by_name.items()), key=lambda s: -s.total)
    out.print_table(tables.time_stat_table(f"kernels ({req.kernel}, {req.iters} calls, torch.profiler)", stats))
    out.print(agreement_line("torch.profiler kernel time", sum(s.total for s in stats) / req.iters, summary))
    out.print(f"Chrome trace (open in https://ui.perfetto.dev): {summary['trace']}", soft_wrap=True)
