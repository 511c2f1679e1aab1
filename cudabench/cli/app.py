"""The `cudabench` command line. The only place that turns errors into a message and an exit code."""

from __future__ import annotations

import functools
import os
import shlex
from dataclasses import replace
import sys
from pathlib import Path
from typing import Callable, List, Optional

import typer
from rich.console import Console
from rich.table import Table

from cudabench import nvtx
from cudabench.errors import ConfigError, CudabenchError, ShapeError

app = typer.Typer(
    help="Build, check, time and profile custom CUDA operators for PyTorch.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
# Piped output (logs, CI) gets a fixed width so tables do not wrap at 80 columns.
_WIDTH = None if sys.stdout.isatty() else 130
out = Console(highlight=False, width=_WIDTH)
err = Console(stderr=True, highlight=False, width=_WIDTH)


def report_errors(fn: Callable) -> Callable:
    """Print a CudabenchError as one paragraph (plus its hint) and exit with its code."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except CudabenchError as exc:
            err.print(f"[bold red]error:[/] {exc.message}", markup=True, highlight=False)
            if exc.hint:
                err.print(f"[dim]hint:[/] {exc.hint}")
            raise typer.Exit(exc.exit_code) from None

    return wrapper


def _registry(kernels_dir: Optional[List[Path]] = None):
    from cudabench.spec.registry import discover

    return discover(kernels_dir or [])


KernelsDir = typer.Option(None, "--kernels-dir", help="Extra folder of kernel families (repeatable).")


# ---- list -------------------------------------------------------------------------------------------

@app.command("list")
@report_errors
def list_kernels(kernels_dir: Optional[List[Path]] = KernelsDir) -> None:
    """Kernels (variants), their family, directions, constraints, default shape and baselines."""
    from cudabench.spec.shapes import format_shape

    reg = _registry(kernels_dir)
    table = Table(header_style="bold")
    for col in ("kernel", "family", "directions", "constraints", "default shape", "summary"):
        table.add_column(col, no_wrap=col in ("kernel", "default shape", "constraints"))
    for family, variant in reg.variants():
        rules = [c.rule for c in (*family.constraints, *variant.constraints)]
        dirs = "fwd, bwd, fwdbwd" if family.grad_inputs and variant.has_backward else "fwd"
        table.add_row(variant.name, family.name, dirs, "\n".join(rules) or "-",
                      format_shape(family.default_shape()), variant.summary)
    out.print(table)
    bl = Table(header_style="bold", title="baselines (timed beside the variants)", title_justify="left")
    for col in ("baseline", "family", "default", "what"):
        bl.add_column(col)
    kinds = [f"{f.name}: {', '.join(f.input_kinds)}" for f in reg.families if len(f.input_kinds) > 1]
    for family in reg.families:
        for b in family.baselines:
            bl.add_row(b.name, family.name, "yes" if b.default else "no", b.summary)
    out.print(bl)
    if kinds:
        out.print("input kinds (--inputs): " + "; ".join(kinds))


# ---- doctor -----------------------------------------------------------------------------------------

@app.command()
@report_errors
def doctor(
    ceilings: bool = typer.Option(False, "--ceilings", help="(Re)measure this GPU's copy bandwidth and SGEMM "
                                  "throughput, the ceilings runs compare against (cached)."),
) -> None:
    """GPU, driver, clocks, torch, nvcc, ninja, nsys, ncu: what works here and what is missing."""
    from cudabench.cli.doctor import findings

    if ceilings:
        from cudabench.measure import ceilings as device_ceilings
        from cudabench.device import require_gpu

        require_gpu()
        measured = device_ceilings.get(remeasure=True)
        out.print(measured.describe() if measured else "[yellow]could not measure the ceilings[/] (out of memory?)")

    table = Table(header_style="bold", show_header=False)
    table.add_column("item")
    table.add_column("ok")
    table.add_column("detail")
    for f in findings():
        table.add_row(f.item, "[green]ok[/]" if f.ok else "[yellow]missing[/]", f.detail)
    out.print(table)


# ---- build ------------------------------------------------------------------------------------------

@app.command("build")
@report_errors
def build_cmd(
    kernel: Optional[List[str]] = typer.Option(None, "--kernel", "-k", help="Kernel or family (repeatable)."),
    all_: bool = typer.Option(False, "--all", help="Every kernel family."),
    check: bool = typer.Option(False, "--check", help="Compile-only with nvcc (and a syntax check of the "
                               "torch binding): no GPU and no CUDA torch needed."),
    arch: Optional[str] = typer.Option(None, "--arch", help="Target, e.g. sm_90 (default: this GPU)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show the compiler's full output."),
    kernels_dir: Optional[List[Path]] = KernelsDir,
) -> None:
    """JIT-build kernel families (cached by a hash of sources, flags, arch and torch version)."""
    from cudabench.spec.build import build, check_compile

    reg = _registry(kernels_dir)
    if not all_ and not kernel:
        raise ShapeError("Name what to build: --kernel NAME (repeatable) or --all.")
    families = list(reg.families) if all_ else list(dict.fromkeys(f for f, _ in reg.resolve(kernel)))
    if check:
        if not arch:
            raise ShapeError("build --check needs a target architecture.", "Add --arch sm_90 (for example).")
        failed = 0
        for family in families:
            for c in check_compile(family, arch):
                status = "[green]ok[/]" if c.ok else "[bold red]FAILED[/]"
                out.print(f"{status} {family.name}: {c.source.name} ({c.seconds:.1f} s)")
                if not c.ok:
                    failed += 1
                    from cudabench.spec.build import compiler_errors

                    err.print(compiler_errors(c.output) if not verbose else c.output)
        if failed:
            raise typer.Exit(1)
        return
    from cudabench.device import require_gpu

    if arch is None:
        require_gpu()
    for family in families:
        b = build(family, arch, verbose)
        state = "cache hit" if b.cache_hit else "compiled"
        out.print(f"[green]ok[/] {family.name} for {b.arch}: {b.seconds:.1f} s ({state}) → {b.directory}")


# ---- run --------------------------------------------------------------------------------------------

def _stop_rule(repeat: Optional[int], min_time: Optional[float], noise: float, max_time: float):
    from cudabench.measure.loop import Adaptive, FixedCount, MinTime

    if repeat is not None and min_time is not None:
        raise ShapeError("--repeat and --min-time are alternatives: give one.")
    if repeat is not None:
        if repeat < 1:
            raise ShapeError("--repeat must be at least 1.")
        return FixedCount(repeat)
    if min_time is not None:
        return MinTime(min_time)
    return Adaptive(target=noise, max_time=max_time)


def _warmup(text: str):
    """'25' = 25 calls; '100ms' / '0.5s' = at least that long (and at least 3 calls)."""
    from cudabench.measure.loop import Warmup

    t = text.strip().lower()
    try:
        if t.endswith("ms"):
            return Warmup(calls=3, seconds=float(t[:-2]) / 1e3)
        if t.endswith("s"):
            return Warmup(calls=3, seconds=float(t[:-1]))
        calls = int(t)
        if calls < 1:
            raise ValueError(t)
        return Warmup(calls=calls, seconds=0.0)
    except ValueError:
        raise ShapeError(f"Cannot read --warmup '{text}'.", "Give a count (25) or a duration (100ms, 0.5s).") from None


def _split(values: Optional[List[str]]) -> Optional[tuple[str, ...]]:
    if values is None:
        return None
    return tuple(v.strip() for item in values for v in item.split(",") if v.strip())


def _check_writable(path: Optional[Path]) -> None:
    """Fail before measuring, not after the first result, when an output cannot be written."""
    if path is None:
        return
    folder = path.parent if str(path.parent) else Path(".")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"Cannot create the folder for {path}: {exc}") from None
    if path.is_dir() or not os.access(folder, os.W_OK):
        raise ConfigError(f"Cannot write {path}.", "Give a file path in a writable folder.")


def _renames(pairs: Optional[List[str]]) -> dict[str, str]:
    renames = {}
    for pair in pairs or ():
        old, sep, new = pair.partition("=")
        if not sep or not old.strip() or not new.strip():
            raise ShapeError(f"Cannot read --record-as '{pair}'.", "Write VARIANT=NAME, e.g. timex-v3=timex-v4.")
        renames[old.strip()] = new.strip()
    return renames


@app.command()
@report_errors
def run(
    kernel: Optional[List[str]] = typer.Option(None, "--kernel", "-k", help="Kernel or family (repeatable; a "
                                               "family means all its variants), e.g. timex-v4."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="A TOML suite (see configs/): kernels, "
                                          "shapes and sweeps, directions, baselines, timing policy."),
    shape: str = typer.Option("", "--shape", "-s", help="Shape parameters, e.g. B=32,C=768,T=768 "
                              "(defaults from `cudabench list`)."),
    direction: Optional[List[str]] = typer.Option(None, "--direction", "-d", help="fwd, bwd or fwdbwd "
                                                  "(repeatable; default fwd, plus fwdbwd with a backward)."),
    baseline: Optional[List[str]] = typer.Option(None, "--baseline", "-b", help="Baseline(s) to time "
                                                 "beside, or 'all' (default: the family's default)."),
    no_baseline: bool = typer.Option(False, "--no-baseline", help="Time no baseline."),
    timing: Optional[str] = typer.Option(None, "--timing", help="sync (default): wall time per call "
                                         "(two-sided synchronize); events: GPU time (CUDA events); graph: "
                                         "CUDA-graph replay; cupti: kernel durations (torch.profiler)."),
    cold: Optional[bool] = typer.Option(None, "--cold/--hot", help="Flush L2 (write 2× its size) before "
                                        "every timed call, or not (default hot)."),
    repeat: Optional[int] = typer.Option(None, "--repeat", "-r", help="Exactly N timed samples."),
    min_time: Optional[float] = typer.Option(None, "--min-time", help="Sample for at least S seconds."),
    noise: Optional[float] = typer.Option(None, "--noise", help="Adaptive stop: target IQR/median "
                                          "(default 0.005)."),
    max_time: Optional[float] = typer.Option(None, "--max-time", help="Adaptive stop: time limit per "
                                             "subject in seconds (default 2)."),
    warmup: Optional[str] = typer.Option(None, "--warmup", help="Untimed warm-up: calls (25) or time "
                                         "(default 100ms)."),
    force: bool = typer.Option(False, "--force", help="Time subjects even when they fail the check."),
    json_path: Optional[Path] = typer.Option(None, "--json", help="Write every sample and the environment "
                                             "here (rewritten after each result)."),
    csv_path: Optional[Path] = typer.Option(None, "--csv", help="Also write a CSV summary here."),
    markdown_path: Optional[Path] = typer.Option(None, "--markdown", help="Also write a Markdown table here."),
    record_as: Optional[List[str]] = typer.Option(None, "--record-as", help="VARIANT=NAME: record a "
                                                  "variant's results under another name (A/B comparisons)."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed of the random inputs (default: fresh)."),
    arch: Optional[str] = typer.Option(None, "--arch", help="Build target (default: this GPU)."),
    inputs: str = typer.Option("uniform", "--inputs", help="Input distribution, e.g. rwkv for timex "
                               "(`cudabench list` shows each family's)."),
    nvtx_on: bool = typer.Option(False, "--nvtx/--no-nvtx", help="Emit NVTX ranges (for Nsight): build, "
                                 "check, warm-up, each case, the timed region, baselines."),
    nvtx_iterations: bool = typer.Option(False, "--nvtx-iterations", help="Also one NVTX range per timed call."),
    kernels_dir: Optional[List[Path]] = KernelsDir,
) -> None:
    """Check kernels against the fp64 reference, then time them (and the baseline) correctly."""
    from cudabench.results import report
    from cudabench.device import environment, require_gpu
    from cudabench.results.export import document, source_hash, to_csv, to_markdown, write_json_atomic, write_text_atomic
    from cudabench.engine.runner import RunOptions, Runner
    from cudabench.results.config import TimingPolicy
    from cudabench.engine.runner import plan
    from cudabench.spec.shapes import parse_shape
    from cudabench.engine.suite import effective_timing, plan_suite
    from cudabench.measure.timers import TIMERS

    if bool(kernel) == bool(config):
        raise ShapeError("Name what to run: --kernel NAME (repeatable) or --config FILE, one of the two.",
                         "`cudabench list` shows the kernels; configs/ holds example suites.")
    suite = None
    if config:
        from cudabench.results.config import load_suite

        suite = load_suite(config)
        kernels_dir = [*(kernels_dir or []), *suite.kernels_dirs]
    policy = effective_timing(TimingPolicy(timing, cold, repeat, min_time, noise, max_time, warmup),
                              suite.timing if suite else None)
    if policy.timing not in TIMERS:
        raise ShapeError(f"Unknown --timing '{policy.timing}'.", f"Choose one of: {', '.join(TIMERS)}.")
    if config and shape:
        raise ShapeError("--shape goes with --kernel; a suite names its shapes in the file.",
                         "Edit the suite's shape tables, or run the kernel with --kernel and --shape.")
    for path in (json_path, csv_path, markdown_path):
        _check_writable(path)
    directions = _split(direction)
    options = RunOptions(
        directions=directions,
        baselines=() if no_baseline else _split(baseline),
        timing=policy.timing,
        rule=_stop_rule(policy.repeat, policy.min_time, policy.noise, policy.max_time),
        warmup=_warmup(policy.warmup),
        force=force,
        arch=arch,
        seed=seed,
        cold=policy.cold,
        inputs=inputs,
        renames=_renames(record_as),
    )
    registry = _registry(kernels_dir)
    if suite:
        tasks = plan_suite(registry, suite, options)
    else:
        tasks = plan(registry, kernel, parse_shape(shape), options)
    planned = {n for t in tasks for n in [*(v.name for v in t.variants), *(b.name for b in t.baselines)]}
    for name in set(options.renames) - planned:
        err.print(f"[yellow]note:[/] --record-as names {name}, which this run does not time.")
    require_gpu()
    if any(t.family.bound for t in tasks):
        from cudabench.measure import ceilings

        options = replace(options, ceilings=ceilings.get())
    nvtx.configure(nvtx_on or nvtx_iterations, iterations=nvtx_iterations)
    env = environment({"timing": policy.timing, "cache": "cold" if policy.cold else "hot", "tf32": "off",
                       **({"config": str(config)} if config else {})})
    command = "cudabench " + shlex.join(sys.argv[1:])
    hashes = {t.family.name: source_hash(t.family) for t in tasks}
    out.print(f"[dim]{report.environment_line(env)}[/]")

    def save() -> None:
        doc = document(runner.results, env, command, runner.seed, hashes)
        if json_path:
            write_json_atomic(json_path, doc)
        if csv_path:
            write_text_atomic(csv_path, to_csv(doc))
        if markdown_path:
            write_text_atomic(markdown_path, to_markdown(doc))

    with progress_for(tasks) as progress:
        def on_result(result) -> None:
            progress.advance()
            save()

        runner = Runner(options, on_result=on_result, on_status=progress.status)
        interrupted = False
        try:
            runner.run(tasks)
        except KeyboardInterrupt:
            interrupted = True
    for table in report.tables(runner.results):
        out.print(table)
    cache = "cold L2 (flushed before each call)" if policy.cold else "hot L2"
    out.print(f"[dim]timing: {policy.timing} — {_timing_text(policy.timing)}; {cache}; inputs seed {runner.seed}[/]")
    summary = report.stop_summary(runner.results)
    if summary:
        out.print(f"[dim]{summary}[/]")
    if options.ceilings is not None:
        out.print(f"[dim]{options.ceilings.describe()}[/]")
    for line in report.notes(runner.results):
        out.print(f"[yellow]{line}[/]" if line.startswith("warning") else f"[dim]{line}[/]")
    save()
    for label, path in (("results", json_path), ("csv", csv_path), ("markdown", markdown_path)):
        if path:
            out.print(f"[dim]{label}: {path}[/]")
    if interrupted:
        err.print(f"[yellow]interrupted:[/] kept {len(runner.results)} result(s) measured so far.")
        raise typer.Exit(130)
    if any(r.status != "ok" and not r.skipped.startswith("constraint") for r in runner.results):
        raise typer.Exit(1)


class progress_for:
    """A Rich progress bar over every subject of every case on a terminal; status lines otherwise."""

    def __init__(self, tasks) -> None:
        self.total = sum(len(t.cases) * (len(t.variants) + len(t.baselines) + len(t.skipped)) for t in tasks)
        self.bar = None

    def __enter__(self) -> "progress_for":
        if err.is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), console=err, transient=True)
            self.bar.start()
            self.task = self.bar.add_task("starting", total=self.total)
        return self

    def status(self, text: str) -> None:
        if self.bar is not None:
            self.bar.update(self.task, description=text[:70])
        else:
            err.print(f"[dim]… {text}[/]")

    def advance(self) -> None:
        if self.bar is not None:
            self.bar.advance(self.task)

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()


# ---- compare and plot --------------------------------------------------------------------------------

@app.command()
@report_errors
def compare(
    old: Path = typer.Argument(..., help="Results JSON of the reference run."),
    new: Path = typer.Argument(..., help="Results JSON of the run to judge."),
    threshold: str = typer.Option("5%", "--threshold", "-t", help="Smallest change that counts (5% or 0.05)."),
) -> None:
    """Noise-aware verdicts per case (bootstrap interval of the ratio of medians); exit 1 when any
    case is slower beyond the threshold — usable as a CI gate."""
    from cudabench.results import report
    from cudabench.results.compare import compare_documents, describe, parse_threshold
    from cudabench.results.export import load_results

    limit = parse_threshold(threshold)
    old_doc, new_doc = load_results(old), load_results(new)
    comparison = compare_documents(old_doc, new_doc, limit)
    for line in report.environment_differences(old_doc, new_doc):
        out.print(f"[yellow]note:[/] {line}")
    out.print(report.compare_table(comparison))
    for title, items in (("only in old", comparison.only_old), ("only in new", comparison.only_new),
                         ("measured in neither", comparison.unmeasured)):
        for line in describe(items):
            out.print(f"[yellow]{title}:[/] {line}")
    if comparison.regressions:
        names = ", ".join(f"{r.subject} {r.key}" for r in comparison.regressions)
        err.print(f"[bold red]regression[/] beyond {limit:.0%}: {names}")
    raise typer.Exit(comparison.exit_code)


@app.command()
@report_errors
def plot(
    results: Path = typer.Argument(..., help="Results JSON of a sweep."),
    output: Path = typer.Option(Path("cudabench-plot.png"), "--output", "-o", help="Image to write (.png, .svg)."),
    param: Optional[str] = typer.Option(None, "--param", "-p", help="The swept shape parameter (default: found)."),
) -> None:
    """Time per call against the swept parameter for each kernel, and speedup over the baseline."""
    from cudabench.results.export import load_results
    from cudabench.results.plot import plot_sweep

    path = plot_sweep(load_results(results), output, param)
    out.print(f"wrote {path}")


# ---- compare-sync-modes ------------------------------------------------------------------------------

@app.command("compare-sync-modes")
@report_errors
def compare_sync_modes(
    kernel: str = typer.Option("add2", "--kernel", "-k", help="One kernel variant, e.g. add2 or timex-v4."),
    shape: str = typer.Option("", "--shape", "-s", help="Shape, e.g. n=2^20 (default: the family's)."),
    direction: str = typer.Option("fwd", "--direction", "-d", help="fwd, bwd or fwdbwd."),
    iters: int = typer.Option(100, "--iters", "-n", help="Timed iterations per mode."),
    warmup: int = typer.Option(10, "--warmup", help="Unsynchronised warm-up calls before each mode."),
    busy_ms: float = typer.Option(1.0, "--busy-ms", help="GPU work (a sleep kernel) queued before each "
                                  "warm-up, as in a program still busy when the timer starts; 0 = the "
                                  "tutorial exactly."),
    show: int = typer.Option(10, "--show", help="Iterations in the per-iteration view."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed of the random inputs."),
    kernels_dir: Optional[List[Path]] = KernelsDir,
) -> None:
    """The four synchronize placements of the classic tutorial beside events, graphs and CUPTI."""
    import random

    from cudabench.results import report
    from cudabench.measure import sync_modes
    from cudabench.device import environment, require_gpu
    from cudabench.engine.runner import plan_single
    from cudabench.spec.shapes import parse_shape

    if iters < 2 or show < 1:
        raise ShapeError("--iters must be at least 2 (the first iteration is shown apart) and --show at least 1.")
    task = plan_single(_registry(kernels_dir), kernel, parse_shape(shape), direction)
    require_gpu()
    seed = seed if seed is not None else random.SystemRandom().randrange(2**31)
    out.print(f"[dim]{report.environment_line(environment())}[/]")
    results, check = sync_modes.compare(task, seed, iters, warmup, busy_ms)
    case = task.cases[0]
    out.print(f"{task.variants[0].name} at {case.shape_text} ({direction}): checked against fp64, "
              f"error {check.worst:.1e}. {iters} iterations per mode, each mode after {warmup} "
              f"unsynchronised warm-up calls" + (f" queued behind {busy_ms:g} ms of earlier GPU work." if busy_ms
                                                 else " (the tutorial exactly)."))
    out.print(report.sync_modes_table(results))
    out.print(report.iteration_view(results[:len(sync_modes.PLACEMENTS)], show))
    out.print(sync_modes.EXPLANATION)


# ---- profile -----------------------------------------------------------------------------------------

@app.command()
@report_errors
def profile(
    kernel: str = typer.Option(..., "--kernel", "-k", help="One kernel variant, e.g. timex-v4."),
    tool: str = typer.Option("nsys", "--tool", "-t", help="nsys (Nsight Systems), ncu (Nsight Compute) or "
                             "torch (torch.profiler, Chrome trace)."),
    shape: str = typer.Option("", "--shape", "-s", help="Shape, e.g. B=32,C=768,T=768."),
    direction: str = typer.Option("fwd", "--direction", "-d", help="fwd, bwd or fwdbwd."),
    out_dir: Path = typer.Option(Path("cudabench-profiles"), "--output-dir", "-o", help="Where reports go."),
    name: str = typer.Option("", "--name", help="Report name (default KERNEL-DIRECTION-TOOL)."),
    iters: int = typer.Option(0, "--iters", "-n", help="Calls in the profiled region (0: nsys and torch "
                              "20, ncu 1)."),
    nsys: Optional[str] = typer.Option(None, "--nsys", help="The nsys to use (else $CUDABENCH_NSYS, PATH, "
                                       "usual install folders)."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed of the random inputs."),
    kernels_dir: Optional[List[Path]] = KernelsDir,
) -> None:
    """Run the kernel under Nsight Systems, Nsight Compute or torch.profiler; print its kernels and
    NVTX ranges."""
    import random

    from cudabench.profile.launch import TOOLS, ProfileRequest
    from cudabench.profile.view import profile_and_report
    from cudabench.engine.runner import plan_single
    from cudabench.spec.shapes import parse_shape

    if tool not in TOOLS:
        raise ShapeError(f"Unknown --tool '{tool}'.", f"Choose one of: {', '.join(TOOLS)}.")
    plan_single(_registry(kernels_dir), kernel, parse_shape(shape), direction)  # user errors first
    if tool == "nsys":
        from cudabench.profile.nsys import find_nsys

        find_nsys(nsys)
    from cudabench.device import require_gpu

    require_gpu()
    req = ProfileRequest(kernel=kernel, tool=tool, shape=shape, direction=direction, out_dir=out_dir,
                         name=name, iterations=iters, kernels_dirs=tuple(kernels_dir or ()),
                         seed=seed if seed is not None else random.SystemRandom().randrange(2**31))
    profile_and_report(req, nsys, out, err)


@app.command(hidden=True)
@report_errors
def worker(
    kernel: str = typer.Option(...), tool: str = typer.Option("nsys"), shape: str = typer.Option(""),
    direction: str = typer.Option("fwd"), iters: int = typer.Option(20), seed: int = typer.Option(0),
    summary: Path = typer.Option(...), trace: Optional[Path] = typer.Option(None),
    kernels_dir: Optional[List[Path]] = KernelsDir,
) -> None:
    """Internal: the process `cudabench profile` runs under the profiler."""
    from cudabench.engine.worker import run_worker

    run_worker(_registry(kernels_dir), kernel, shape, direction, tool, iters, summary, seed, trace)


# ---- check -------------------------------------------------------------------------------------------

@app.command()
@report_errors
def check(
    kernel: List[str] = typer.Option(..., "--kernel", "-k", help="Kernel or family (repeatable)."),
    shape: str = typer.Option("", "--shape", "-s", help="Shape parameters (each family takes its own)."),
    direction: Optional[List[str]] = typer.Option(None, "--direction", "-d", help="fwd, bwd or fwdbwd."),
    baselines: bool = typer.Option(False, "--baselines", help="Check the family's default baselines too."),
    inputs: str = typer.Option("uniform", "--inputs", help="Input distribution, e.g. rwkv for timex."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed of the random inputs (default: fresh)."),
    kernels_dir: Optional[List[Path]] = KernelsDir,
) -> None:
    """Check kernels against the fp64 reference on fresh random inputs, without timing them."""
    from cudabench.results import report
    from cudabench.device import require_gpu
    from cudabench.engine.runner import RunOptions, Runner, plan
    from cudabench.spec.shapes import parse_shape

    options = RunOptions(directions=_split(direction), baselines=None if baselines else (), seed=seed, time=False,
                         inputs=inputs)
    tasks = plan(_registry(kernels_dir), kernel, parse_shape(shape), options)
    require_gpu()
    results = Runner(options).run(tasks)
    out.print(report.check_table(results))
    for line in report.notes(results):
        out.print(f"[dim]{line}[/]")
    if any(r.status != "ok" and not r.skipped.startswith("constraint") for r in results):
        raise typer.Exit(1)


def _timing_text(name: str) -> str:
    from cudabench.measure.timers import TIMERS

    return TIMERS[name].describes


def main() -> None:
    app()


if __name__ == "__main__":
    main()
