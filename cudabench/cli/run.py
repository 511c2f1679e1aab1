"""`cudabench run`: plan here, run every subject in an isolated worker
process, print the tables, and keep the results files current after each result."""

# Imports inside the commands are deliberate: every command module is loaded at start-up (for
# `cudabench --help` too), so each command imports what it uses when it runs.

from __future__ import annotations

import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any, List, Optional

import typer

from cudabench.cli.common import FLAGS, KernelsDir, detail, err, out, registry, say, split
from cudabench.cli.run_outputs import Outputs, store_path
from cudabench.cli.runner import failed, gpus_of, op_kernels
from cudabench.engine.start import start_runner
from cudabench.engine.request import DEFAULTS
from cudabench.errors import RunFailedError, ShapeError
from cudabench.results.records.model import timing_help


DTYPE_HELP = ("Precision of inputs and outputs: float32 (default), bfloat16, float16, or several "
              "(float32,bfloat16), each a case; subjects without it are listed as skipped.")
INPUTS_HELP = ("Input distribution: uniform (default, every family), a family's own kind, e.g. rwkv for "
               "timex, or one every family has: outliers, pareto, constant, zeros, large (`cudabench list`). "
               "Every run also checks one judged call on another kind, drawn at random.")


def renames(pairs: Optional[List[str]]) -> dict[str, str]:
    found = {}
    for pair in pairs or ():
        old, sep, new = pair.partition("=")
        if not sep or not old.strip() or not new.strip():
            raise ShapeError(f"Cannot read --record-as '{pair}'.", "Write VARIANT=NAME, e.g. timex-v3=timex-v4.")
        found[old.strip()] = new.strip()
    return found


def run(
    kernel: Optional[List[str]] = typer.Option(None, "--kernel", "-k", help="Kernel or family (repeatable or "
                                               "comma-separated; a family means all its variants), e.g. timex-v4."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="A TOML suite (see configs/): kernels, "
                                          "shapes and sweeps, directions, baselines, timing policy."),
    shape: Optional[List[str]] = typer.Option(None, "--shape", "-s", help="Shape parameters, e.g. B=32,C=768,"
                                              "T=768 (defaults: `cudabench list`); repeatable, one case each."),
    direction: Optional[List[str]] = typer.Option(None, "--direction", "-d", help="fwd, bwd or fwdbwd "
                                                  "(repeatable; default fwd, plus fwdbwd with a backward)."),
    baseline: Optional[List[str]] = typer.Option(None, "--baseline", "-b", help="Baseline(s) to time "
                                                 "beside, or 'all' (default: the family's default)."),
    no_baseline: bool = typer.Option(False, "--no-baseline", help="Time no baseline."),
    timing: Optional[str] = typer.Option(None, "--timing", help=timing_help(DEFAULTS["timing"])),
    cold: Optional[bool] = typer.Option(None, "--cold/--hot", help="Flush L2 (write 2× its size) before "
                                        "every timed call, or not (default hot)."),
    repeat: Optional[int] = typer.Option(None, "--repeat", "-r", help="Exactly N timed samples."),
    min_time: Optional[float] = typer.Option(None, "--min-time", help="Sample for at least S seconds."),
    noise: Optional[float] = typer.Option(None, "--noise", help="Adaptive stop: sample until the median is "
                                          "known to ± this share (half its 95 % confidence interval; default "
                                          f"{DEFAULTS['noise']:g})."),
    max_time: Optional[float] = typer.Option(None, "--max-time", help="Adaptive stop: time limit per "
                                             f"subject in seconds (default {DEFAULTS['max_time']:g})."),
    warmup: Optional[str] = typer.Option(None, "--warmup", help="Untimed warm-up: calls (25) or time "
                                         f"(default {DEFAULTS['warmup']})."),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Seconds one subject may take (check, "
                                            "timing, integrity checks) before its worker is killed "
                                            f"(default {DEFAULTS['timeout']:g})."),
    integrity: bool = typer.Option(True, "--integrity/--no-integrity", help="After timing, check that the "
                                   "figure can be trusted (stale outputs, work outside the timed window, no "
                                   "work, impossible throughput). --no-integrity skips them, and says so."),
    fuzz: int = typer.Option(2, "--fuzz", min=0, max=100, help="Also check each variant at this many random "
                             "shapes within its constraints (ragged sizes, small); 0: not checked, and said."),
    force: bool = typer.Option(False, "--force", help="Time subjects even when they fail the check."),
    json_path: Optional[Path] = typer.Option(None, "--json", help="Write every sample and the environment "
                                             "here (rewritten after each result; - for standard output, once "
                                             "at the end)."),
    csv_path: Optional[Path] = typer.Option(None, "--csv", help="Also write a CSV summary here (- for standard "
                                            "output)."),
    store: Optional[str] = typer.Option(None, "--store", help="Also append the run to a results store (SQLite) "
                                        "with this work tree's git commit: --store PATH, or --store alone for "
                                        "$CUDABENCH_STORE or .cudabench/results.db at the top of the work tree "
                                        "(see `cudabench history`)."),
    markdown_path: Optional[Path] = typer.Option(None, "--markdown", help="Also write a Markdown table here (- for standard "
                                                 "output)."),
    record_as: Optional[List[str]] = typer.Option(None, "--record-as", help="VARIANT=NAME: record a "
                                                  "variant's results under another name (A/B comparisons)."),
    seed: Optional[int] = typer.Option(None, "--seed", min=0, max=2**31 - 1, help="Seed of the random inputs "
                                       "(default: fresh)."),
    arch: Optional[str] = typer.Option(None, "--arch", help="Build target (default: this GPU)."),
    inputs: str = typer.Option("uniform", "--inputs", help=INPUTS_HELP),
    dtype: Optional[List[str]] = typer.Option(None, "--dtype", help=DTYPE_HELP),
    nvtx_on: bool = typer.Option(False, "--nvtx/--no-nvtx", help="Emit NVTX ranges (for Nsight): build, "
                                 "check, warm-up, each case, the timed region, baselines."),
    nvtx_iterations: bool = typer.Option(False, "--nvtx-iterations", help="Also one NVTX range per timed call."),
    gpus: Optional[str] = typer.Option(None, "--gpus", help="Spread subjects over this host's GPUs: 'all' or "
                                       "indices as nvidia-smi numbers them, e.g. 0,2 (one worker each; "
                                       "default: one GPU)."),
    cluster: Optional[str] = typer.Option(None, "--cluster", help="Run on a Dask distributed cluster: its "
                                          "scheduler's address, e.g. tcp://head:8786 (workers started with "
                                          "--resources GPU=1; needs cudabench[cluster])."),
    warm: Optional[bool] = typer.Option(None, "--warm/--no-warm", help="Use (and leave running) each GPU's "
                                        "warm worker, so the next run skips Python, torch and CUDA start-up "
                                        "(default: on; CUDABENCH_WARM=0 turns it off; `cudabench workers`)."),
    baselines_from: Optional[Path] = typer.Option(None, "--baselines-from", help="Keep each baseline's result "
                                                  "from this earlier results file where it was measured at the same "
                                                  "case on this GPU, driver, torch, cudabench and settings, and no "
                                                  "Python file of the kernels folders changed, instead of measuring it "
                                                  "again (one GPU; watch does this from its second turn)."),
    baselines_digest: Optional[str] = typer.Option(None, "--baselines-digest", hidden=True,
                                                   help="watch: the sha256 that file had when its run wrote it."),
    wide: bool = typer.Option(False, "--wide", help="Every figure in the tables (error, IQR, min, n, kernel "
                              "time, TFLOP/s, GB/s, peak memory, a speedup per baseline); the results files "
                              "keep them all anyway."),
    op: Optional[str] = typer.Option(None, "--op", help="Time an op of your own package instead of a kernel "
                                     "family: its import path, e.g. mypkg.ops:fused_add (with --op-inputs, "
                                     "--op-reference and --shape; --baseline then takes import paths such as "
                                     "torch.add)."),
    op_inputs: Optional[str] = typer.Option(None, "--op-inputs", help="With --op: inputs(shape, generator, "
                                            "device) -> {name: tensor}, by import path."),
    op_reference: Optional[str] = typer.Option(None, "--op-reference", help="With --op: reference(*inputs), "
                                               "the math on float64 copies, by import path."),
    op_grad: Optional[List[str]] = typer.Option(None, "--op-grad", help="With --op: the inputs that get "
                                                "gradients (then bwd and fwdbwd are timed too)."),
    kernels_dir: Optional[List[Path]] = KernelsDir,
) -> None:
    """Check kernels against the fp64 reference, then time them (and the baseline) correctly, each in
    an isolated worker process (on one GPU, every GPU of this host, or a Dask cluster)."""
    started = time.perf_counter()
    from cudabench.device import require_gpu
    from cudabench.engine.kept import KEY, baselines_key
    from cudabench.engine.plan import plan_shapes, planned_run
    from cudabench.engine.plan_cache import cached_plan, keep_plan, plan_key
    from cudabench.engine.request import checked, effective_timing, run_options
    from cudabench.engine.suite import plan_suite
    from cudabench.engine.suite_file import TimingPolicy, load_suite
    from cudabench.spec.shapes import parse_shapes

    if not op and (op_inputs or op_reference or op_grad):
        raise ShapeError("--op-inputs, --op-reference and --op-grad go with --op (the op to time, by import path).")
    if op:
        if kernel or config:
            raise ShapeError("--op names what to run: give it without --kernel or --config.")
        kernel, kernel_dirs_of_op, baseline = op_kernels(op, op_inputs, op_reference, op_grad, shape, baseline, dtype)
        kernels_dir = [*(kernels_dir or []), kernel_dirs_of_op]
    if bool(kernel) == bool(config):
        raise ShapeError("Name what to run: --kernel NAME (repeatable) or --config FILE, one of the two.",
                         "`cudabench list` shows the kernels; configs/ holds example suites.")
    suite = load_suite(config) if config else None
    kernels_dirs = [*(kernels_dir or []), *(suite.kernels_dirs if suite else ())]
    policy = effective_timing(checked(TimingPolicy(timing, cold, repeat, min_time, noise, max_time, warmup, timeout)),
                              suite.timing if suite else None)
    if config and shape:
        raise ShapeError("--shape goes with --kernel; a suite names its shapes in the file.",
                         "Edit the suite's shape tables, or run the kernel with --kernel and --shape.")
    shapes = parse_shapes(shape)
    outputs = Outputs(json_path, csv_path, markdown_path, store_path(store))
    outputs.check(inputs=(config,) if config else ())
    if arch:
        from cudabench.spec.build import normalize_arch

        arch = normalize_arch(arch)
    gpus = gpus or (suite.gpus if suite else None)
    cluster = cluster or (suite.cluster if suite else None)
    if gpus and cluster:
        raise ShapeError("--gpus and --cluster are alternatives: a cluster's GPUs are its Dask workers.",
                         "Start one Dask worker per GPU (dask worker ... --resources GPU=1).")
    earlier = earlier_results(baselines_from, baselines_digest, cluster, op)
    chosen = gpus_of(gpus) if gpus and gpu_likely() else []
    options = run_options(
        policy, directions=split(direction), baselines=() if no_baseline else split(baseline), force=force, arch=arch,
        seed=seed, inputs=inputs, dtypes=split(dtype), renames=renames(record_as), integrity=integrity, fuzz=fuzz,
        nvtx=nvtx_on or nvtx_iterations, nvtx_iterations=nvtx_iterations)
    settings = {"timing": policy.timing, "cache": "cold" if policy.cold else "hot", "tf32": "off",
                "integrity": "on" if integrity else "off", "fuzz": str(fuzz), **({"config": str(config)} if config else {}),
                **({"gpus": ",".join(str(g.index) for g in chosen)} if chosen else {}),
                **({"cluster": cluster} if cluster else {}), KEY: baselines_key(options, kernels_dirs)}
    with start_runner(options, kernels_dirs, settings, chosen, cluster, warm) as runner:
        if gpu_likely() and not cluster:
            runner.launch()  # the worker starts (Python, torch, CUDA) while this process plans
        key = plan_key(kernels_dirs, split(kernel), shapes, config, options)
        planned = cached_plan(key)
        if planned is None:  # planned here: each family's spec.py is imported, and torch with it
            reg = registry(kernels_dirs)
            planned = planned_run(plan_suite(reg, suite, options) if suite
                                  else plan_shapes(reg, split(kernel), shapes, options))
            if not cluster:
                require_gpu()  # after planning: a user's mistake is reported first, with or without a GPU
            keep_plan(key, planned)  # kept once this machine could run it
        for name in set(options.renames) - planned.names:
            say(("note: ", "yellow"), f"--record-as names {name}, which this run does not time.", console=err)
        with outputs.tables_elsewhere():
            execute(runner, planned, outputs, "cudabench " + shlex.join(sys.argv[1:]), policy, started, wide, earlier)


def gpu_likely() -> bool:
    """Whether an NVIDIA driver is present, without importing torch (which would delay the worker's
    start by the time of that import): only decides whether to start a worker early."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return os.path.exists("/dev/nvidiactl") and visible not in ("", "-1")


def earlier_results(path: Optional[Path], digest: Optional[str], cluster: Optional[str], op: Optional[str]) -> Optional[dict]:
    """--baselines-from's results file, read once and validated before anything runs (a user's mistake:
    one error); None, with a note, where nothing can be kept from it."""
    if path is None:
        return None
    from cudabench.engine.kept import read_earlier

    doc, why = read_earlier(path, digest)
    why = why or ("the run goes to a Dask cluster" if cluster else
                  "an --op run's baselines are your package's code, which cudabench does not hash" if op else "")
    if why:
        say(("note: ", "yellow"), f"--baselines-from {path}: nothing kept ({why}).", console=err)
    return None if why else doc


def execute(runner: Any, planned: Any, outputs: Outputs, command: str, policy: Any,
            started: Optional[float] = None, wide: bool = False, earlier: Optional[dict] = None) -> None:
    """Run the planned tasks in workers; print tables and notes; exit non-zero when a subject failed.
    `started`: when the command began (perf_counter), for the time breakdown; `earlier`: the results
    whose baselines may be kept (cudabench.engine.kept)."""
    from cudabench.cli.run_outputs import BackgroundSaver
    from cudabench.results.report import terminal as report
    from cudabench.results.exporters.json_document import document, result_to_dict
    from cudabench.engine.kept import kept_results
    from cudabench.results.records.codec import to_data
    from cudabench.results.records.model import RunTime

    hashes = dict(planned.source_hashes)
    env: list = []
    encoded: dict[int, dict] = {}  # each result encoded once (runner.results holds them to the end)

    def current(complete: bool, run_time: Optional[RunTime] = None) -> dict:
        results = list(runner.results)
        for r in results:
            if id(r) not in encoded:
                encoded[id(r)] = result_to_dict(r)
        return document([encoded[id(r)] for r in results], env[0], command, runner.seed, hashes, complete, run_time)

    saver = BackgroundSaver(lambda: outputs.save(current(False)) if env else None)

    def on_result(result) -> None:
        progress.advance()
        saver.changed()

    interrupted = False
    started = time.perf_counter() if started is None else started
    with progress_for(planned) as progress:
        runner.on_result, runner.on_status = on_result, progress.status
        try:
            runner.start()
            env.append(environment_record(runner.environment))
            detail(report.environment_line(env[0]))
            one = runner.gpu_count == 1 and not runner.options.renames  # a case's baseline and variants on one GPU
            kept = kept_results(planned.entries, to_data(env[0]), earlier) if earlier and one else {}
            if kept:
                detail(f"kept {len(kept)} baseline result(s) from an earlier run (same case, GPU, driver, torch, "
                       "settings and Python files), not measured again: " + ", ".join(sorted({r.subject for r in kept.values()})))
            runner.run(planned, kept) if kept else runner.run(planned)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            runner.close()  # workers end here, before the tables, also on Ctrl-C
            saver.close()   # before the final save below
    run_time = RunTime(time.perf_counter() - started, runner.gpu_count, tuple(runner.waited.items()))
    for table in report.tables(runner.results, wide):
        out.print_table(table)
    print_notes(runner, runner.options, policy)
    if runner.results:
        detail(report.time_breakdown(runner.results, run_time))
    if env:
        outputs.save(current(not interrupted, run_time), final=True)
    outputs.tell()
    missing = outputs.missing()
    if missing and not interrupted:
        raise RunFailedError(f"The run ended without writing {', '.join(map(str, missing))}, which it was asked for.",
                       "Nothing was measured to write (see the messages above).")
    if interrupted:
        say(("interrupted: ", "yellow"), f"kept {len(runner.results)} result(s) measured so far.", console=err)
        raise typer.Exit(130)
    if failed(runner.results):
        raise typer.Exit(1)


def environment_record(data: dict):
    """The worker's environment as the record results files hold (keys it does not know are left out)."""
    from cudabench.results.records.codec import from_data
    from cudabench.results.records.model import Environment

    return from_data(Environment, data)


def print_notes(runner: Any, options: Any, policy: Any) -> None:
    from cudabench.measure.ceilings import Ceilings
    from cudabench.results.records.model import TIMINGS
    from cudabench.results.report import terminal as report

    cache = "cold L2 (flushed before each call)" if policy.cold else "hot L2"
    detail(f"timing: {policy.timing} — {TIMINGS[policy.timing].figure}; {cache}; inputs seed {runner.seed}")
    out.print(report.isolation_line(runner.results, runner.workers_started, options.integrity), style="dim")
    summary = report.stop_summary(runner.results)
    if summary:
        detail(summary)
    if runner.ceilings:
        detail(Ceilings(**runner.ceilings).describe())
    for line in report.notes(runner.results):
        style = "yellow" if line.startswith(("warning", "INVALID", "ERROR")) else "dim"
        out.print(line, style=style)
    for line in getattr(runner, "notes", lambda: [])():
        say((line, "yellow"), console=err)


class progress_for:
    """A Rich progress bar over every subject of every case on a terminal; status lines otherwise."""

    def __init__(self, planned) -> None:
        self.total = len(planned.entries)
        self.bar = None

    def __enter__(self) -> "progress_for":
        if err.is_terminal and not FLAGS.quiet:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), console=err, transient=True)
            self.bar.start()
            self.task = self.bar.add_task("starting", total=self.total)
        return self

    def status(self, text: str) -> None:
        if self.bar is not None:
            self.bar.update(self.task, description=text[:70])
        elif not FLAGS.quiet:
            err.print(f"… {text}", style="dim")

    def advance(self) -> None:
        if self.bar is not None:
            self.bar.advance(self.task)

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()
