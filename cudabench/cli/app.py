"""The `cudabench` command line: wires one module per command group. Errors become messages and exit
codes in cudabench.cli.common.report_errors, and nowhere else."""

from __future__ import annotations

import sys
from typing import Optional

import typer

from cudabench import __version__
from cudabench.cli import build, check, doctor, lessons, listing, profile, results, run, watch, workers
from cudabench.cli.common import FLAGS, report_errors
from cudabench.cli.once import OnceCommand

app = typer.Typer(
    help="Build, check, time and profile custom CUDA operators for PyTorch.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help text is printed as written: brackets such as cudabench[plot] stay
    context_settings={"help_option_names": ["-h", "--help"]},
)

# Two or three examples under each command's --help ("\b" keeps click from re-wrapping them).
EXAMPLES = {
    "list": ["cudabench list", "cudabench list --kernels-dir ./my_kernels"],
    "doctor": ["cudabench doctor", "cudabench doctor --ceilings"],
    "build": ["cudabench build --kernel timex-v4", "cudabench build --all --check --arch sm_90",
              "cudabench build -k add2 --check --arch sm_90 -v"],
    "check": ["cudabench check --kernel timex", "cudabench check -k timex-v4 -d fwdbwd --inputs rwkv --baselines"],
    "run": ["cudabench run --kernel timex-v4",
            "cudabench run -k timex-v4 --shape B=32,C=768,T=768 -d fwdbwd --baseline fft --timing events",
            "cudabench run --config configs/timex.toml --json results.json --markdown -",
            "cudabench run -k timex-v4 --store   # appended to .cudabench/results.db with the git commit"],
    "compare": ["cudabench compare old.json new.json", "cudabench compare old.json new.json --threshold 3%",
                "cudabench compare old.json new.json --markdown verdicts.md --allow-missing",
                "cudabench compare @HEAD~1 @latest   # stored runs (cudabench run --store)"],
    "history": ["cudabench history", "cudabench history -k timex-v4 --case T=768 --gpu H100",
                "cudabench history -k timex-v4 --plot history.png --store results.db"],
    "plot": ["cudabench plot sweep.json -o sweep.png", "cudabench plot sweep.json --param T -o sweep.svg"],
    "show": ["cudabench show results.json", "cudabench show results.json --wide"],
    "report": ["cudabench report --html report.html   # the store's latest run, its plots and history",
               "cudabench report --html report.html --results sweep.json --store results.db"],
    "compare-sync-modes": ["cudabench compare-sync-modes", "cudabench compare-sync-modes --kernel timex-v4 --iters 30",
                           "cudabench compare-sync-modes -k add2 --timeline add2-sync-modes.png"],
    "compare-transfer": ["cudabench compare-transfer", "cudabench compare-transfer --sizes 4KB,64MB --iters 20"],
    "watch": ["cudabench watch -k timex-v4", "cudabench watch -k timex-fft --shape B=8,C=64,T=1024 -d fwdbwd",
              "cudabench watch --config configs/timex.toml --timing events"],
    "workers": ["cudabench workers", "cudabench workers --stop",
                "CUDABENCH_WORKER_IDLE=1800 cudabench run -k timex-v4   # its worker waits 30 min"],
    "profile": ["cudabench profile --kernel timex-v4", "cudabench profile -k timex-fft -d fwdbwd --tool ncu",
                "cudabench profile -k add2 --tool torch", "cudabench profile -k add2 --timeline add2-nsys.png"],
}

COMMANDS = [
    ("list", listing.list_kernels),
    ("doctor", doctor.doctor_cmd),
    ("build", build.build_cmd),
    ("check", check.check),
    ("run", run.run),
    ("compare", results.compare),
    ("history", results.history),
    ("plot", results.plot),
    ("show", results.show),
    ("report", results.report_cmd),
    ("compare-sync-modes", lessons.compare_sync_modes),
    ("compare-transfer", lessons.compare_transfer),
    ("profile", profile.profile),
    ("workers", workers.workers_cmd),
]
for name, command in COMMANDS:
    epilog = "Examples:\n\n\b\n" + "\n".join(f"  {line}" for line in EXAMPLES[name])
    app.command(name, epilog=epilog, cls=OnceCommand)(report_errors(command))
# watch passes every option it does not know to run
app.command("watch", epilog="Examples:\n\n\b\n" + "\n".join(f"  {line}" for line in EXAMPLES["watch"]),
            cls=OnceCommand, context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
            )(report_errors(watch.watch))


def _version(show: bool) -> None:
    if show:
        typer.echo(f"cudabench {__version__}")
        raise typer.Exit()


@app.callback()
def options(
    version: Optional[bool] = typer.Option(None, "--version", callback=_version, is_eager=True,
                                           help="Print cudabench's version and exit."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only tables, warnings and errors: no progress "
                               "or context lines (for CI logs)."),
    traceback: bool = typer.Option(False, "--traceback", help="On an error, also print the Python traceback "
                                   "(e.g. to debug your own spec.py)."),
) -> None:
    """Build, check, time and profile custom CUDA operators for PyTorch."""
    FLAGS.quiet, FLAGS.traceback = quiet, traceback


def main() -> None:
    from cudabench.cli.supervise import supervised
    from cudabench.engine.sealed import seal

    seal()  # it holds the pipes to its workers: no subject may open them through /proc (docs/trust.md)

    for stream in (sys.stdout, sys.stderr):  # a name no encoding of the terminal can write is escaped, not fatal
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    sys.argv[1:] = optional_value(sys.argv[1:], "--store", commands=("run", "history"))
    supervised(run_app)


def run_app() -> None:
    """The app, with click's usage errors (an option's value of the wrong type, an unknown option) as
    one paragraph like every other mistake, and exit 2."""
    from cudabench.cli.common import click_error, err, say

    try:
        code = app(standalone_mode=False)
    except Exception as exc:
        if type(exc).__name__ == "Abort":  # Ctrl-C or end of input, after the command's own handling
            raise SystemExit(130) from None
        if not click_error(exc) or exc.exit_code != 2:
            raise
        say(("error: ", "bold red"), exc.format_message(), console=err)
        ctx = getattr(exc, "ctx", None)
        say(("hint: ", "dim"), f"`{ctx.command_path if ctx is not None else 'cudabench'} --help` shows its usage.",
            console=err)
        raise SystemExit(2) from None
    raise SystemExit(code if isinstance(code, int) else 0)


def optional_value(args: list[str], option: str, commands: tuple[str, ...]) -> list[str]:
    """`--store` alone (last, or before another option) becomes `--store=`: the default store. Only
    for commands without positional arguments, where the next word can only be its value; the
    command is the first word that is not an option (the global options take no value)."""
    command = next((a for a in args if not a.startswith("-")), None)
    if command not in commands:
        return args
    # `-` alone is a value (standard output), which store_path then refuses with a reason
    return [f"{a}=" if a == option and (i + 1 == len(args) or (args[i + 1].startswith("-") and args[i + 1] != "-"))
            else a for i, a in enumerate(args)]


if __name__ == "__main__":
    main()
