"""The lessons: `cudabench compare-sync-modes` (the tutorial's four synchronize placements beside the
correct timers) and `cudabench compare-transfer` (host-to-device copies timed right and wrong, and
overlap), measured in a worker process like every other run."""

# Imports inside the commands are deliberate: every command module is loaded at start-up (for
# `cudabench --help` too), so each command imports what it uses when it runs.

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from cudabench.cli.common import KernelsDir, detail, fresh_seed, out, registry
from cudabench.errors import ShapeError

TIMELINE_ITERATIONS = 3  # per mode in the --timeline picture: enough to see the pattern, few enough to read


def compare_sync_modes(
    kernel: str = typer.Option("add2", "--kernel", "-k", help="One kernel variant, e.g. add2 or timex-v4."),
    shape: str = typer.Option("", "--shape", "-s", help="Shape, e.g. n=2^20 (default: the family's)."),
    direction: str = typer.Option("fwd", "--direction", "-d", help="fwd, bwd or fwdbwd."),
    iters: int = typer.Option(100, "--iters", "-n", min=1, max=100_000, help="Timed iterations per mode."),
    warmup: int = typer.Option(10, "--warmup", min=0, max=100_000, help="Unsynchronised warm-up calls before each mode."),
    busy_ms: float = typer.Option(1.0, "--busy-ms", min=0.0, max=10_000.0, help="GPU work (a sleep kernel) queued before each "
                                  "warm-up, as in a program still busy when the timer starts; 0 = the "
                                  "tutorial exactly."),
    show: int = typer.Option(10, "--show", min=0, max=1000, help="Iterations in the per-iteration view."),
    seed: Optional[int] = typer.Option(None, "--seed", min=0, max=2**31 - 1, help="Seed of the random inputs."),
    timeline: Optional[str] = typer.Option(None, "--timeline", help="Also draw a few iterations of each mode "
                                           "on one time axis (host launches, synchronize waits and the clock's "
                                           "span above the GPU's kernels, from CUPTI) into this image (.png, "
                                           ".svg, .pdf; needs matplotlib)."),
    kernels_dir: Optional[List[Path]] = KernelsDir,
) -> None:
    """The four synchronize placements of the classic tutorial beside events, graphs and CUPTI."""
    from cudabench.engine.plan import plan_single
    from cudabench.device import require_gpu
    from cudabench.measure import sync_modes
    from cudabench.engine.protocol import Hello, SyncModes, request
    from cudabench.engine.workers import one_request
    from cudabench.results.report import lesson_tables
    from cudabench.spec.shapes import parse_shape

    if iters < 2 or show < 1:
        raise ShapeError("--iters must be at least 2 (the first iteration is shown apart) and --show at least 1.")
    if timeline:
        from cudabench.results.plots.sweep import check_image_path, matplotlib_classes

        check_image_path(timeline)
        matplotlib_classes()  # missing matplotlib is said now, not after the measurement
    task = plan_single(registry(kernels_dir), kernel, parse_shape(shape), direction)
    require_gpu()
    seed = fresh_seed(seed)
    case = task.cases[0]
    hello = request(Hello(tuple(str(d) for d in kernels_dir or ()), ceilings=False))
    question = request(SyncModes(task.family.name, case, task.variants[0].name, seed, iters, warmup, busy_ms,
                                 TIMELINE_ITERATIONS if timeline else 0))
    _, reply = one_request(hello, question, 60 * iters, "sync-modes", kernel, on_ready=show_environment)
    results = [sync_modes.ModeResult(m["name"], tuple(m["samples"]), m["valid"], m["contains"]) for m in reply["modes"]]
    worst = max(reply["check"]["errors"].values())
    out.print(f"{task.variants[0].name} at {case.shape_text} ({direction}): checked against fp64, "
              f"error {worst:.1e}. {iters} iterations per mode, each mode after {warmup} "
              f"unsynchronised warm-up calls" + (f" queued behind {busy_ms:g} ms of earlier GPU work." if busy_ms
                                                 else " (the tutorial exactly)."))
    out.print(lesson_tables.sync_modes_table(results))
    out.print(lesson_tables.iteration_view(results[:len(sync_modes.PLACEMENTS)], show))
    out.print(sync_modes.EXPLANATION)
    if timeline:
        from cudabench.results.plots.timeline import plot_timeline

        headings = {m.name.removeprefix("sync "): (f"{m.name}: median {m.rest_median * 1e6:.1f} µs per call ("
                                                   + ("a measurement of the call" if m.valid else
                                                      "NOT a measurement of the kernel") + "); brackets: what the "
                                                   "host clock timed", m.valid)
                    for m in results[:len(sync_modes.PLACEMENTS)]}
        title = (f"{task.variants[0].name} at {case.shape_text} ({direction}): {TIMELINE_ITERATIONS} iterations per "
                 f"mode after {min(warmup, 3)} warm-up calls queued behind {reply['timeline_busy_ms'] * 1e3:.0f} µs "
                 "of earlier GPU work\n"
                 "host lane: what the clock timed (brackets) and the CUDA API calls; GPU lane: the kernels (CUPTI)")
        path = plot_timeline(reply["timeline"], headings, title, timeline,
                             "µs since the mode began (its queued earlier GPU work and warm-up first)")
        out.print(f"wrote {path}")


SIZE_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30}
MAX_TRANSFER = 16 * 10**9  # bytes: pinned, pageable and device copies of this size must fit


def parse_size(text: str) -> int:
    """'1MB' (10^6), '256MiB' (2^20), '1GB', '4096', '2^20' -> bytes."""
    import re

    from cudabench.spec.shapes import parse_value

    match = re.fullmatch(r"\s*([0-9^*_.]+)\s*([A-Za-z]*)\s*", text)
    unit = match.group(2).upper() if match else ""
    try:
        if not match or unit not in SIZE_UNITS:
            raise ValueError(text)
        number = match.group(1)
        if "." in number:  # exact decimal arithmetic: '2.01MB' is 2010000 bytes, not one short
            from decimal import Decimal, InvalidOperation

            try:
                exact = Decimal(number) * SIZE_UNITS[unit]
            except InvalidOperation:
                raise ValueError(text) from None
            if exact != exact.to_integral_value():
                raise ValueError(text)
            value = int(exact)
        else:
            value = parse_value(number) * SIZE_UNITS[unit]
    except ValueError:
        raise ShapeError(f"Cannot read the size '{text}'.", "Write sizes like 1MB, 256MiB, 1GB, 2^20 or 4096 "
                         "(bytes).") from None
    if not 1 <= value <= MAX_TRANSFER:
        raise ShapeError(f"The size '{text}' is outside 1 byte … 16 GB.", "Choose sizes between 1 B and 16GB.")
    return int(value)


def compare_transfer(
    sizes: str = typer.Option("1MB,16MB,256MB,1GB", "--sizes", help="Copy sizes, comma-separated (1MB = 10^6 bytes, "
                              "1MiB = 2^20)."),
    iters: int = typer.Option(10, "--iters", "-n", min=1, max=10_000, help="Copies per size, source and method."),
    overlap_size: str = typer.Option("256MB", "--overlap-size", help="The next batch copied during a kernel."),
    json_path: Optional[Path] = typer.Option(None, "--json", help="Also write every sample (seconds per copy) "
                                             "and the overlap figures here."),
) -> None:
    """Host-to-device copies from pageable and pinned memory, blocking and not, timed correctly and the
    way people get wrong; then a copy overlapped with a kernel."""
    from cudabench.device import require_gpu
    from cudabench.measure import transfer
    from cudabench.engine.protocol import Hello, Transfer, request
    from cudabench.engine.workers import one_request
    from cudabench.results.report import lesson_tables

    from cudabench.results.exporters.json_document import write_json_atomic

    from cudabench.outputs import check_output_path

    check_output_path(json_path)
    chosen = [parse_size(s) for s in sizes.split(",") if s.strip()]
    if not chosen:
        raise ShapeError("--sizes names no size.", "e.g. --sizes 1MB,1GB")
    batch = parse_size(overlap_size)
    require_gpu()
    # every size is copied 12 times per iteration (2 sources × 2 modes × 3 methods), the batch about 3
    # times, plus warm-ups: allow a pageable link as slow as 0.1 GB/s
    seconds = (12 * iters + 4) * sum(chosen) / 1e8 + (3 * iters + 16) * batch / 1e8
    asked = request(Transfer(tuple(chosen), iters, batch))
    ready, reply = one_request(request(Hello((), ceilings=False)), asked, seconds, "transfer", "the copies",
                               on_ready=show_environment)
    if json_path:
        write_json_atomic(json_path, {"schema": "cudabench.transfer", "schema_version": 1, "environment":
                                      ready["environment"], "copies": reply["copies"], "overlap": reply["overlap"]})
    copies = [transfer.CopyResult(**{**c, "samples": tuple(c["samples"])}) for c in reply["copies"]]
    overlap = reply["overlap"]
    overlap = transfer.Overlap(**{**overlap, "sequential": tuple(overlap["sequential"]),
                                  "overlapped": tuple(overlap["overlapped"])})
    out.print(f"{iters} copies per row, each from an idle GPU; medians.")
    out.print(lesson_tables.transfer_table(copies))
    out.print(lesson_tables.overlap_table(overlap))
    out.print(transfer.EXPLANATION)


def show_environment(ready: dict) -> None:
    """The worker's GPU and software, said as soon as it is ready (before the measurement)."""
    from cudabench.cli.run import environment_record
    from cudabench.results.report import terminal as report

    detail(report.environment_line(environment_record(ready["environment"])))
