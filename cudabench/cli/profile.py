"""`cudabench profile`: one worker, answering one request, under Nsight Systems, Nsight Compute or
torch.profiler; then the tool's findings as tables."""

# Imports inside the commands are deliberate: every command module is loaded at start-up (for
# `cudabench --help` too), so each command imports what it uses when it runs.

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from cudabench.cli.common import KernelsDir, err, fresh_seed, out, registry
from cudabench.errors import ConfigError, ShapeError

PROFILE_TIMEOUT = 1800.0  # the worker's start, a first build, and the tool's own overhead (ncu replays)


def profile(
    kernel: str = typer.Option(..., "--kernel", "-k", help="One kernel variant, e.g. timex-v4."),
    tool: str = typer.Option("nsys", "--tool", "-t", help="nsys (Nsight Systems), ncu (Nsight Compute) or "
                             "torch (torch.profiler, Chrome trace)."),
    shape: str = typer.Option("", "--shape", "-s", help="Shape, e.g. B=32,C=768,T=768."),
    direction: str = typer.Option("fwd", "--direction", "-d", help="fwd, bwd or fwdbwd."),
    dtype: Optional[str] = typer.Option(None, "--dtype", help="float32, bfloat16 or float16 (default: the "
                                        "first the variant takes)."),
    out_dir: Path = typer.Option(Path("cudabench-profiles"), "--output-dir", "-o", help="Where reports go."),
    name: str = typer.Option("", "--name", help="Report name (default KERNEL-DIRECTION-TOOL)."),
    iters: int = typer.Option(0, "--iters", "-n", min=0, max=1_000_000, help="Calls in the profiled region (0: nsys and torch "
                              "20, ncu 1)."),
    nsys: Optional[str] = typer.Option(None, "--nsys", help="The nsys to use with --tool nsys (else "
                                       "$CUDABENCH_NSYS, PATH, usual install folders). ncu: $CUDABENCH_NCU."),
    seed: Optional[int] = typer.Option(None, "--seed", min=0, max=2**31 - 1, help="Seed of the random inputs."),
    timeline: Optional[Path] = typer.Option(None, "--timeline", help="With --tool nsys: also draw the first "
                                            "profiled calls from the report (NVTX call ranges, launch and "
                                            "synchronize calls, kernels) into this image (.png, .svg, .pdf; "
                                            "needs matplotlib)."),
    kernels_dir: Optional[List[Path]] = KernelsDir,
) -> None:
    """Run the kernel under Nsight Systems, Nsight Compute or torch.profiler; print its kernels and
    NVTX ranges."""
    from cudabench.engine.workers import run_one_shot
    from cudabench.profile.launch import TOOLS, ProfileRequest
    from cudabench.profile.view import profile_and_report
    from cudabench.engine.plan import plan_single
    from cudabench.spec.shapes import parse_shape

    if tool not in TOOLS:
        raise ShapeError(f"Unknown --tool '{tool}'.", f"Choose one of: {', '.join(TOOLS)}.")
    if nsys and tool != "nsys":
        # An error, not a warning: the user named a binary and would otherwise believe it was used.
        other = "; $CUDABENCH_NCU chooses the ncu binary." if tool == "ncu" else "."
        raise ConfigError(f"--nsys only applies to --tool nsys (this is --tool {tool}).", "Drop --nsys" + other)
    if timeline and tool != "nsys":
        raise ConfigError(f"--timeline reads an Nsight Systems report (this is --tool {tool}).",
                          "Use --tool nsys, or compare-sync-modes --timeline for a timeline from CUPTI.")
    if timeline:
        from cudabench.results.plots.sweep import check_image_path, matplotlib_classes

        check_image_path(timeline)
        matplotlib_classes()  # missing matplotlib is said now, not after profiling
    task = plan_single(registry(kernels_dir), kernel, parse_shape(shape), direction, dtype=dtype)  # errors first
    if tool == "nsys":
        from cudabench.profile.nsys import find_nsys

        find_nsys(nsys)
    elif tool == "ncu":
        from cudabench.profile.ncu import find_ncu

        find_ncu()
    from cudabench.device import require_gpu

    require_gpu()
    req = ProfileRequest(kernel=kernel, tool=tool, shape=shape, direction=direction, out_dir=out_dir,
                         name=name, iterations=iters, kernels_dirs=tuple(kernels_dir or ()),
                         seed=fresh_seed(seed), case=task.cases[0], timeline=timeline)
    profile_and_report(req, nsys, out, err,
                       lambda command, env, echo: run_one_shot(command, env, echo, timeout=PROFILE_TIMEOUT))
