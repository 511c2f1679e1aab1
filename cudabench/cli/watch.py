"""`cudabench watch`: run, then wait for an edit to any source or spec.py of the kernels folders (or
to the suite file, or to the package of an op named with --op), and run again. The build is incremental and each GPU's warm worker is already up,
so an edit reaches a trusted figure in seconds. Every run after the first is followed by compare's
noise-aware verdicts against the last run that measured something. A failed build or check shows its
message and watching goes on; a mistake in the command itself (an unknown kernel, a bad option, no
GPU) ends it with exit 2, as run would. From the second turn on, the baselines' results of the turn
before are kept where nothing they depend on changed (run's --baselines-from, given the sha256 of the
file as that run wrote it; --fresh-baselines measures them every turn; never with --cluster or --op):
an edit of a kernel's CUDA sources does not change PyTorch's code. Every option but --interval,
--fresh-baselines and --json (the latest turn's results, copied from the file each turn's run writes) is
run's."""

from __future__ import annotations

import itertools
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional

import typer

from cudabench.cli.common import check_writable, click_error, err, is_stdout, say
from cudabench.cli.run_outputs import WRITTEN
from cudabench.errors import EXIT_USAGE, ShapeError
from cudabench.outputs import write_text_atomic

Stamp = dict[Path, tuple[int, int]]
SKIPPED_PARTS = {"__pycache__", ".git"}


def watch(ctx: typer.Context,
          interval: float = typer.Option(0.5, "--interval", min=0.05, help="Seconds between two looks at the "
                                         "files."),
          fresh_baselines: bool = typer.Option(False, "--fresh-baselines", help="Measure the baselines again on "
                                               "every turn (by default a turn keeps a baseline's result from the "
                                               "turn before while its case, GPU, torch, family sources and "
                                               "settings are the same: run's --baselines-from)."),
          json_path: Optional[Path] = typer.Option(None, "--json", help="Results of every turn that measured "
                                                   "something, written here (each turn replaces the last). "
                                                   "Each turn's run writes its own file, which the next turn's "
                                                   "verdicts read.")) -> None:
    """Run (with any of run's options: `cudabench run --help`), then run again after every edit of a kernel
    family or the suite file."""
    args = list(ctx.args)
    if not any(_names_option(a) for a in args):
        raise ShapeError("watch needs what to run: --kernel (-k), --config (-c) or --op, as run does.",
                         "For example: cudabench watch -k timex-v4 --shape B=8,C=64,T=256")
    watched = watched_paths(args)
    previous: Optional[Path] = None
    own = ("--baselines-from", "--baselines-digest", "--cluster", "--op")  # a turn may not add its own to these
    keeps = not fresh_baselines and not any(a.startswith(own) for a in args)
    if json_path is not None:
        if is_stdout(json_path):
            raise ShapeError("watch --json takes a file: on standard output the results would mix with the tables.",
                             "Give a path, e.g. --json latest.json.")
        check_writable(json_path)
    with tempfile.TemporaryDirectory(prefix="cudabench-watch-") as tmp:
        for turn in itertools.count(1):
            out = Path(tmp) / f"run-{turn}.json"
            written = WRITTEN.get(str(previous)) if keeps and previous is not None else None
            keep = ["--baselines-from", str(previous), "--baselines-digest", written] if written else []
            code = invoke(["run", *args, *keep, "--json", str(out)])
            if code == EXIT_USAGE and turn == 1:
                raise typer.Exit(EXIT_USAGE)  # the command itself is wrong: it will not get better
            if previous is not None and _measured(out):
                invoke(["compare", str(previous), str(out), "--allow-missing"])
            if _measured(out):
                previous = out
                if json_path is not None:
                    write_text_atomic(json_path, out.read_text())
            stamp = snapshot(watched)
            say(f"watching {len(stamp)} files for changes (Ctrl-C to stop)", style="dim")
            changed = wait_for_change(watched, stamp, interval)
            say(f"changed: {', '.join(str(p) for p in changed[:3])}{' ...' if len(changed) > 3 else ''}", style="dim")


def _names_option(arg: str) -> bool:
    return arg in ("-k", "--kernel", "-c", "--config", "--op") or arg.startswith(("--kernel=", "--config=", "--op=",
                                                                                  "-k", "-c"))


def watched_paths(args: list[str]) -> list[Path]:
    """The built-in kernels folder, every --kernels-dir, the suite file (--config), and the packages of
    --op, --op-inputs and --op-reference."""
    from cudabench.spec.registry import builtin_kernels_dir

    paths = [builtin_kernels_dir()]
    for i, arg in enumerate(args):
        for option in ("--kernels-dir", "--config", "-c", "--op", "--op-inputs", "--op-reference"):
            value = args[i + 1] if arg == option and i + 1 < len(args) else (
                arg.split("=", 1)[1] if arg.startswith(option + "=") else None)
            if value is not None:
                paths += module_paths(value) if option.startswith("--op") else [Path(value)]
    return paths


def module_paths(import_path: str) -> list[Path]:
    """Where an import path's top-level module lives (its package folder, or its file), found without
    running any of its code; nothing where it is not found (run says why)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(import_path.split(":", 1)[0].split(".", 1)[0])
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    if spec.submodule_search_locations:
        return [Path(p) for p in spec.submodule_search_locations]
    return [Path(spec.origin)] if spec.origin and Path(spec.origin).is_file() else []


def snapshot(paths: list[Path]) -> Stamp:
    """Size and modification time of every file under `paths` (caches and build outputs aside)."""
    stamp: Stamp = {}
    for root in paths:
        files = [root] if root.is_file() else (root.rglob("*") if root.is_dir() else [])
        for path in files:
            if SKIPPED_PARTS & set(path.parts) or not path.is_file():
                continue
            try:
                info = path.stat()
            except OSError:
                continue
            stamp[path] = (info.st_mtime_ns, info.st_size)
    return stamp


def wait_for_change(paths: list[Path], stamp: Stamp, interval: float,
                    sleep: Callable[[float], None] = time.sleep) -> list[Path]:
    """The files added, removed or changed since `stamp`, once there are any."""
    while True:
        sleep(interval)
        now = snapshot(paths)
        changed = sorted(p for p in set(now) | set(stamp) if now.get(p) != stamp.get(p))
        if changed:
            return changed


def invoke(argv: list[str]) -> int:
    """One cudabench command in this process (torch, once imported, stays imported); its exit code."""
    from typer.main import get_command

    from cudabench.cli.app import app

    try:
        code = get_command(app).main(args=argv, prog_name="cudabench", standalone_mode=False)
    except Exception as exc:
        if type(exc).__name__ == "Exit":
            return int(getattr(exc, "exit_code", 0) or 0)
        if not click_error(exc):
            raise
        say(("error: ", "bold red"), exc.format_message(), console=err)
        return exc.exit_code
    return int(code or 0)


def _measured(path: Path) -> bool:
    return path.is_file() and path.stat().st_size > 0
