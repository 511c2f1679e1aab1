"""`cudabench check`: kernels against the fp64 reference on fresh random inputs, in the isolated
workers of `run`, without timing them."""

# Imports inside the commands are deliberate: every command module is loaded at start-up (for
# `cudabench --help` too), so each command imports what it uses when it runs.

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from cudabench.cli.common import KernelsDir, out, registry, split
from cudabench.cli.run import DTYPE_HELP, INPUTS_HELP
from cudabench.cli.runner import failed, fuzz_tasks
from cudabench.engine.start import start_runner


def check(
    kernel: List[str] = typer.Option(..., "--kernel", "-k", help="Kernel or family (repeatable or "
                                     "comma-separated)."),
    shape: Optional[List[str]] = typer.Option(None, "--shape", "-s", help="Shape parameters (each family takes "
                                              "its own); repeatable, each shape its own cases."),
    direction: Optional[List[str]] = typer.Option(None, "--direction", "-d", help="fwd, bwd or fwdbwd."),
    baselines: bool = typer.Option(False, "--baselines", help="Check the family's default baselines too."),
    inputs: str = typer.Option("uniform", "--inputs", help=INPUTS_HELP),
    dtype: Optional[List[str]] = typer.Option(None, "--dtype", help=DTYPE_HELP),
    seed: Optional[int] = typer.Option(None, "--seed", min=0, max=2**31 - 1, help="Seed of the random inputs "
                                       "(default: fresh)."),
    fuzz: int = typer.Option(0, "--fuzz", min=0, max=1000, help="Also check each variant at N random shapes "
                             "within its constraints (ragged sizes included), one row each."),
    kernels_dir: Optional[List[Path]] = KernelsDir,
) -> None:
    """Check kernels against the fp64 reference on fresh random inputs, without timing them."""
    from cudabench.device import require_gpu
    from cudabench.engine.plan import RunOptions, plan_shapes
    from cudabench.results.report import terminal as report
    from cudabench.spec.shapes import parse_shapes

    options = RunOptions(directions=split(direction), baselines=None if baselines else (), seed=seed, time=False,
                         inputs=inputs, dtypes=split(dtype))
    reg = registry(kernels_dir)
    tasks = plan_shapes(reg, split(kernel), parse_shapes(shape), options)
    tasks += fuzz_tasks(reg, tasks, fuzz, options, seed)
    require_gpu()
    with start_runner(options, kernels_dir or []) as runner:
        results = runner.run(tasks)
    out.print(report.check_table(results))
    for line in report.notes(results):
        out.print(line, style="dim")
    if failed(results):
        raise typer.Exit(1)

