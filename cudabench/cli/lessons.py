"""`cudabench compare-sync-modes`: the tutorial's four synchronize placements beside the correct
timers, measured in a worker process like every other run."""

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
    from cudabench.engine.lane import HELLO_TIMEOUT
    from cudabench.engine.worker import case_to_dict
    from cudabench.engine.workers import ProcessWorker, WorkerLost, worker_command
    from cudabench.device import require_gpu
    from cudabench.errors import CudabenchError
    from cudabench.measure import sync_modes
    from cudabench.results import report
    from cudabench.spec.shapes import parse_shape

    if iters < 2 or show < 1:
        raise ShapeError("--iters must be at least 2 (the first iteration is shown apart) and --show at least 1.")
    if timeline:
        from cudabench.results.plot import check_image_path, matplotlib_classes

        check_image_path(timeline)
        matplotlib_classes()  # missing matplotlib is said now, not after the measurement
    task = plan_single(registry(kernels_dir), kernel, parse_shape(shape), direction)
    require_gpu()
    seed = fresh_seed(seed)
    case = task.cases[0]
    worker = ProcessWorker(worker_command())
    try:
        ready = worker.request({"op": "hello", "kernels_dirs": [str(d) for d in kernels_dir or ()]}, HELLO_TIMEOUT)
        if ready.get("type") != "ready":
            raise CudabenchError(str(ready.get("message")), str(ready.get("hint", "")))
        detail(report.environment_line(_environment(ready['environment'])))
        reply = worker.request({"op": "sync-modes", "family": task.family.name, "case": case_to_dict(case),
                                "subject": task.variants[0].name, "seed": seed, "iterations": iters,
                                "warmup": warmup, "busy_ms": busy_ms, "timeline": TIMELINE_ITERATIONS if timeline
                                else 0}, HELLO_TIMEOUT + 60 * iters)
    except WorkerLost as lost:
        raise CudabenchError(f"{kernel} could not be measured: {lost.reason}") from None
    finally:
        worker.close()
    if reply.get("type") != "sync-modes":
        error = CudabenchError(str(reply.get("message", reply)), str(reply.get("hint", "")))
        error.exit_code = int(reply.get("exit_code", 1))
        raise error
    results = [sync_modes.ModeResult(m["name"], tuple(m["samples"]), m["valid"], m["contains"]) for m in reply["modes"]]
    worst = max(reply["check"]["errors"].values())
    out.print(f"{task.variants[0].name} at {case.shape_text} ({direction}): checked against fp64, "
              f"error {worst:.1e}. {iters} iterations per mode, each mode after {warmup} "
              f"unsynchronised warm-up calls" + (f" queued behind {busy_ms:g} ms of earlier GPU work." if busy_ms
                                                 else " (the tutorial exactly)."))
    out.print(report.sync_modes_table(results))
    out.print(report.iteration_view(results[:len(sync_modes.PLACEMENTS)], show))
    out.print(sync_modes.EXPLANATION)
    if timeline:
        from cudabench.results.timeline import plot_timeline

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


def _environment(data: dict):
    from cudabench.cli.run import environment_record

    return environment_record(data)
