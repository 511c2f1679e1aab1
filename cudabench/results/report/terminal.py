"""Rich tables for the terminal. Pure formatting: takes records, returns renderables."""

from __future__ import annotations

from itertools import groupby
from typing import Iterable, Optional, Sequence

from rich import box
from rich.table import Table
from rich.text import Text

from cudabench.results.records.model import (TIMINGS, Environment, Measurement, Result, RunTime, noisy, sm_clock,
                                             throttle_names, throttle_warning)
from cudabench.results.records.stats import speedup, throughput
from cudabench.results.units import fmt_bytes, fmt_error, fmt_share, fmt_time


def environment_line(env: Environment) -> str:
    parts = []
    if env.gpu:
        parts.append(f"{env.gpu} (sm_{env.capability.replace('.', '')}, {env.sm_count} SMs)")
    if env.driver:
        parts.append(f"driver {env.driver}")
    parts.append(f"torch {env.torch} (CUDA {env.cuda_runtime})")
    return " · ".join(parts)


def extra(r: Result, key: str) -> Optional[float]:
    return dict(r.measurement.extra).get(key) if r.measurement is not None else None


def check_cell(r: Result) -> Text:
    if r.check is None:
        return Text("-", style="dim")
    worst = r.check.worst
    style = "green" if r.check.passed else "bold red"
    label = fmt_error(worst) if r.check.passed else f"FAIL {fmt_error(worst)}"
    return Text(label, style=style)




def median_label_of(timings: set[str]) -> str:
    """The median column's heading: the timer's own when every result has the same one."""
    return TIMINGS[next(iter(timings))].label if len(timings) == 1 and next(iter(timings)) in TIMINGS else "median"


def kernel_time(r: Result) -> Optional[float]:
    return extra(r, "kernel_time_cupti")


STATUS_STYLE = {"ok": "green", "FAIL": "bold red", "INVALID": "bold red", "ERROR": "bold red", "SKIP": "yellow"}


def results_table(results: Sequence[Result], title: str, wide: bool = False) -> Table:
    """One table for one family at one shape and precision. By default what a reader decides with,
    whole at 80 columns: direction, kernel, the headline figure (the median under the run's timer)
    with its 95 % interval, the speedup against the first baseline, % of the device's ceiling and
    the status. `wide`: every figure (error, IQR, min, n, kernel time, kernels per call, TFLOP/s,
    GB/s, peak memory, a speedup per baseline). The results files keep everything either way."""
    return wide_table(results, title) if wide else compact_table(results, title)


def compact_table(results: Sequence[Result], title: str) -> Table:
    timings = {r.measurement.timing for r in results if r.measurement}
    median_label = median_label_of(timings)
    baseline = next((r.subject for r in results if r.role == "baseline" and r.trusted), None)
    ceiling = any(extra(r, "ceiling_fraction") is not None for r in results)
    table = Table(title=title, title_justify="left", header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("dir", no_wrap=True)
    table.add_column("kernel", no_wrap=True)
    table.add_column(f"{median_label} ±95%", justify="right", no_wrap=True)
    if baseline:
        table.add_column(f"vs {baseline}", justify="right", no_wrap=True)
    if ceiling:
        table.add_column("% ceil", justify="right", no_wrap=True)
    table.add_column("status", no_wrap=True)
    for direction, group in groupby(results, key=lambda r: r.case.direction):
        rows = list(group)
        base = next((x for x in rows if x.subject == baseline and x.trusted), None)
        for r in rows:
            figure = r.stats is not None and r.status not in ("INVALID", "ERROR")
            cells: list = [direction, Text(r.subject, style="cyan" if r.role == "baseline" else ""),
                           f"{fmt_time(r.stats.median)} {fmt_share(r.stats.precision)}" if figure else "-"]
            if baseline:
                cells.append(f"{speedup(base.stats.median, r.stats.median):.2f}×" if figure and base and r.trusted
                             else "-")
            if ceiling:
                cells.append(optional_cell(r, "ceiling_fraction") if figure else "-")
            cells.append(Text(r.status, style=STATUS_STYLE.get(r.status, "")))
            table.add_row(*cells)
    return table


def wide_table(results: Sequence[Result], title: str) -> Table:
    """Every figure: a speedup column per baseline, and kernel time, kernels per call and % of the
    device ceiling where known."""
    table = Table(title=title, title_justify="left", header_style="bold")
    timings = {r.measurement.timing for r in results if r.measurement}
    median_label = median_label_of(timings)
    optional = [(key, label) for key, label in (("kernel_time_cupti", "kernel (CUPTI)"),
                                                ("kernels_per_call", "kernels/call"),
                                                ("ceiling_fraction", "% ceiling"))
                if any(extra(r, key) is not None for r in results)]
    baselines = list(dict.fromkeys(r.subject for r in results if r.role == "baseline" and r.trusted))
    memory = any(r.peak_memory >= 0 for r in results)
    clock = any(clock_ratio(r) is not None for r in results)
    columns = ["dir", "kernel", "rel err", median_label, "±95% CI", "IQR", "min", "n", *(label for _, label in optional),
               "TFLOP/s", "GB/s", *(["peak mem"] if memory else []), *(["SM clock"] if clock else []),
               *(f"vs {b}" for b in baselines)]
    for col in columns:
        table.add_column(col, justify="left" if col in ("dir", "kernel") else "right")
    for direction, group in groupby(results, key=lambda r: r.case.direction):
        rows = list(group)
        for r in rows:
            name = Text(r.subject, style="cyan" if r.role == "baseline" else "")
            if r.stats is None or r.status in ("INVALID", "ERROR"):
                # no figure to show: an untrusted one is in the results file, and its reason below
                blanks = [""] * (len(columns) - 4)
                style = "bold red" if r.status in ("INVALID", "ERROR") else "yellow"
                table.add_row(direction, name, check_cell(r), Text(r.status, style=style), *blanks)
                continue
            s = r.stats
            # throughput from the kernel time when the per-call figure is mostly launch
            t = kernel_time(r) or s.median
            cells = [direction, name, check_cell(r), fmt_time(s.median), fmt_share(s.precision), f"{s.noise:.1%}",
                     fmt_time(s.min),
                     str(s.n), *(optional_cell(r, key) for key, _ in optional)]
            tflops, gbs = throughput(r.flops, t) / 1e12, throughput(r.bytes, t) / 1e9
            cells += [f"{tflops:.2f}" if tflops else "-", f"{gbs:.0f}" if gbs else "-"]
            cells += [fmt_bytes(r.peak_memory)] if memory else []
            cells += [f"{clock_ratio(r):.0%}" if clock_ratio(r) is not None else "-"] if clock else []
            for b in baselines:
                base = next((x for x in rows if x.subject == b and x.trusted), None)
                cells.append(f"{speedup(base.stats.median, s.median):.2f}×" if base and r.trusted else "-")
            table.add_row(*cells)
    return table


def clock_ratio(r: Result) -> Optional[float]:
    """The SM clock while its samples were taken, as a share of the GPU's maximum."""
    sm, top = sm_clock(dict(r.measurement.clocks)) if r.measurement else (None, None)
    return sm / top if sm and top else None


def optional_cell(r: Result, key: str) -> str:
    value = extra(r, key)
    if value is None:
        return "-"
    if key == "kernel_time_cupti":
        return fmt_time(value)
    if key == "ceiling_fraction":
        return f"{value:.0%}"
    return f"{value:.0f}"


def gpu_model(r: Result, ran_on: dict[str, str]) -> str:
    """The GPU model a result ran on; one skipped before it ran takes its case's."""
    return r.gpu or ran_on.get(r.case.key, "")


def tables(results: Iterable[Result], wide: bool = False) -> list[Table]:
    """Group results by GPU model (when there are several), family, shape and precision, keeping run
    order, and make a table for each: speedups are then always between subjects on one GPU model,
    in one precision."""
    out = []
    ordered = list(results)
    ran_on = {r.case.key: r.gpu for r in ordered if r.gpu}
    models = list(dict.fromkeys(gpu_model(r, ran_on) for r in ordered if gpu_model(r, ran_on)))
    grouped = [(gpu_model(r, ran_on) if len(models) > 1 else "", r.case.family, r.case.shape_text, r.case.dtype)
               for r in ordered]
    for model, family, shape, dtype in sorted(dict.fromkeys(grouped), key=lambda k: models.index(k[0]) if k[0] else 0):
        rows = [r for r, k in zip(ordered, grouped) if k == (model, family, shape, dtype)]
        rows.sort(key=lambda r: (r.case.direction != "fwd", r.case.direction))
        title = f"{family}  {shape}  {dtype}" + (f"  on {model}" if model else "")
        out.append(results_table(rows, title, wide))
    return out


def notes(results: Sequence[Result]) -> list[str]:
    """Lines under the tables: skips, kernel time versus per-call cost, and warnings (one line for
    all subjects that stopped sampling above the noise target)."""
    lines, noisy_ones = [], []
    other_precision: dict[str, list[str]] = {}  # subject -> the precisions it was skipped in
    for r in results:
        who = f"{r.subject} {r.case.direction}"
        if r.skipped.startswith("dtype:"):
            seen = other_precision.setdefault(r.subject, [])
            seen += [r.case.dtype] if r.case.dtype not in seen else []
        elif r.skipped:
            lines.append(f"{who}: {r.skipped}")
        if r.error:
            lines.append(f"ERROR {who} ({r.case.shape_text}): {r.error}")
        if r.invalid_because:
            lines.append(f"INVALID {who} ({r.case.shape_text}), not used in any speedup: {r.invalid_because}")
        for c in r.integrity:
            if not c.failed and c.name == "process-state" and c.detail:
                lines.append(f"{who}: {c.detail}")
        if r.measurement is None or r.stats is None:
            continue
        k = kernel_time(r)
        if k is not None:
            lines.append(f"{who}: {fmt_time(r.stats.median)} per call includes launch and synchronisation; "
                         f"its GPU kernels run {fmt_time(k)} (CUPTI), which throughput and % ceiling use.")
        if noisy(r.measurement.stop_reason):
            noisy_ones.append(f"{who} ±{r.stats.precision:.2%}")
        warning = throttle_warning(dict(r.measurement.clocks))
        if warning:
            lines.append(f"warning: {who}: {warning}")
        note = throttled_note(r.measurement)
        if note:
            lines.append(f"{who}: {note}")
    for skipped_in in dict.fromkeys(tuple(v) for v in other_precision.values()):
        names = [n for n, v in other_precision.items() if tuple(v) == skipped_in]
        lines.append(f"not run in {', '.join(skipped_in)}: {', '.join(names)} (they do not take it; "
                     "`cudabench list` shows each one's precisions)")
    if noisy_ones:
        lines.append(f"warning: {len(noisy_ones)} subject(s) reached the time limit before their median was known "
                     f"to the target precision (95 % CI): {', '.join(noisy_ones)}. Their medians are reported; "
                     "GPU-side timers (--timing events or graph) vary less than wall time per call.")
    return lines


def throttled_note(m: Measurement) -> str:
    """What the samples taken while the GPU was throttled did to a figure, naming NVML's reasons."""
    throttled = [c for c in m.sample_clocks if c.throttled]
    why = ", ".join(dict.fromkeys(n for c in throttled for n in throttle_names(c.reasons)))
    why = f" ({why})" if why else ""
    left_out = len(m.throttled_samples)
    if left_out:
        return (f"{left_out} of {left_out + len(m.samples)} samples left out: taken while the GPU was throttled"
                f"{why}; the results file keeps them")
    if throttled:  # every batch was throttled: split_throttled keeps them all
        return (f"all {len(m.samples)} samples were taken while the GPU was throttled{why}: kept, as nothing else "
                "was measured, so this figure is slower than the GPU can do")
    return ""


def isolation_line(results: Sequence[Result], workers: int, integrity: bool) -> str:
    """How the subjects ran: in how many worker processes, and whether their figures were verified."""
    timed = [r for r in results if r.measurement is not None]
    checked = sum(1 for r in timed if r.integrity)
    invalid = sum(1 for r in timed if r.invalid_because)
    text = f"isolation: {len(results)} result(s) from {workers} worker process(es)"
    if not integrity:
        return text + "; integrity checks SKIPPED (--no-integrity): figures are not verified"
    return text + (f"; integrity checks on {checked} timed subject(s), {invalid} INVALID" if timed else "")


BREAKDOWN = ("start-up", "build", "inputs", "reference", "check", "warm-up", "sampling", "integrity")


def phase_totals(phase_lists: Iterable[Iterable[tuple[str, float]]], waited: Iterable[tuple[str, float]] = ()
                 ) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Seconds per top-level phase over the results' (name, seconds) phases, after the lanes' waits;
    and each phase's named parts ("integrity/cupti" is integrity's part cupti)."""
    spent: dict[str, float] = dict(waited)
    parts_of: dict[str, dict[str, float]] = {}
    for phases in phase_lists:
        for name, seconds in phases:
            top, _, part = name.partition("/")
            spent[top] = spent.get(top, 0.0) + seconds
            if part:
                parts_of.setdefault(top, {})
                parts_of[top][part] = parts_of[top].get(part, 0.0) + seconds
    return spent, parts_of


def time_breakdown(results: Sequence[Result], run_time: RunTime) -> str:
    """Where the run's wall time went: the waits for workers to start and build, then each phase
    summed over the subjects (measure.subject.PHASES; integrity with its parts beside it), and the
    rest (planning, messages, saving results, tables; with several GPUs also a GPU's idle time) as
    other. With several GPUs the total is wall time × GPUs."""
    wall, gpus = run_time.wall, run_time.gpus
    spent, parts_of = phase_totals((r.phases for r in results), run_time.waited)
    parts = [f"{name} {spent[name]:.1f} s" + _split(parts_of.get(name, {}), spent[name])
             for name in BREAKDOWN if spent.get(name, 0.0) >= 0.05]
    total = wall * max(gpus, 1)
    other = total - sum(spent.values())
    share = spent.get("sampling", 0.0) / total if total > 0 else 0.0
    head = (f"time: {wall:.1f} s wall, {share:.0%} of it timed sampling" if gpus <= 1 else
            f"time: {wall:.1f} s wall on {gpus} GPUs ({total:.1f} GPU-seconds), {share:.0%} of them timed sampling")
    return head + " — " + ", ".join(parts) + f", other {max(0.0, other):.1f} s"


def _split(parts: dict[str, float], total: float) -> str:
    """A phase's named parts, largest first, and what is left of it: ' (cupti 1.0, shapes 0.5, rest 0.1)'."""
    if not parts:
        return ""
    named = sorted(parts.items(), key=lambda kv: -kv[1])
    text = [f"{name} {seconds:.1f}" for name, seconds in named if seconds >= 0.05]
    rest = total - sum(parts.values())
    if rest >= 0.05:
        text.append(f"rest {rest:.1f}")
    return f" ({', '.join(text)})" if text else ""


def stop_summary(results: Sequence[Result]) -> str:
    reasons = [r.measurement.stop_reason for r in results if r.measurement]
    met = sum(1 for x in reasons if not noisy(x))
    return f"sampling: {met} of {len(reasons)} subjects reached the precision target" if reasons else ""


# ---- check -------------------------------------------------------------------------------------------

def check_table(results: Sequence[Result]) -> Table:
    """`cudabench check`: each subject's error per output against the fp64 reference."""
    outputs = list(dict.fromkeys(name for r in results if r.check for name, _ in r.check.errors))
    table = Table(title="‖out − ref‖ / ‖ref‖ against the fp64 reference", title_justify="left",
                  header_style="bold")
    for col in ("case", "kernel", *outputs, "tolerance", "result"):
        table.add_column(col, justify="left" if col in ("case", "kernel", "result") else "right")
    for r in results:
        errors = dict(r.check.errors) if r.check else {}
        cells = [fmt_error(errors[o]) if o in errors else "-" for o in outputs]
        verdict = Text("pass", style="green") if r.check and r.check.passed else Text(
            "FAIL" if r.check else r.status, style="bold red" if r.check else "yellow")
        table.add_row(f"{r.case.shape_text} {r.case.direction}", r.subject, *cells,
                      f"{r.check.tolerance:g}" if r.check else "-", verdict)
    return table
