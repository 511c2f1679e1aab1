"""The `cudabench` command line: wires one module per command group. Errors become messages and exit
codes in cudabench.cli.common.report_errors, and nowhere else."""

from __future__ import annotations

import typer

from cudabench.cli import build, doctor, lessons, listing, profile, results, run
from cudabench.cli.common import report_errors

app = typer.Typer(
    help="Build, check, time and profile custom CUDA operators for PyTorch.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

COMMANDS = [
    ("list", listing.list_kernels),
    ("doctor", doctor.doctor_cmd),
    ("build", build.build_cmd),
    ("check", run.check),
    ("run", run.run),
    ("compare", results.compare),
    ("plot", results.plot),
    ("compare-sync-modes", lessons.compare_sync_modes),
    ("profile", profile.profile),
]
for name, command in COMMANDS:
    app.command(name)(report_errors(command))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
