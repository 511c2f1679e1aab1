"""`cudabench compare` and `cudabench plot`: reading results files."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console

from cudabench.cli.common import err, out, say
from cudabench.errors import ConfigError


def compare(
    old: Path = typer.Argument(..., help="Results JSON of the reference run."),
    new: Path = typer.Argument(..., help="Results JSON of the run to judge."),
    threshold: str = typer.Option("5%", "--threshold", "-t", help="Smallest change that counts (5% or 0.05)."),
    allow_missing: bool = typer.Option(False, "--allow-missing", help="Pass even when a subject measured in old "
                                       "is missing, skipped or failed in new (never when one is INVALID or "
                                       "crashed, nor when new has nothing measured)."),
    json_path: Optional[Path] = typer.Option(None, "--json", help="Also write the verdicts as JSON here "
                                             "(- for standard output)."),
    markdown_path: Optional[Path] = typer.Option(None, "--markdown", help="Also write the verdicts as a Markdown "
                                                 "table here, e.g. for a pull-request comment (- for standard "
                                                 "output)."),
) -> None:
    """Noise-aware verdicts per case (bootstrap interval of the ratio of medians). Exit 1 when a case
    is slower beyond the threshold, a subject measured in old is not measured in new, a result is
    INVALID or crashed, or a file has nothing measured: usable as a CI gate. With --json - or
    --markdown -, standard output carries only that; the table and notes go to standard error."""
    from cudabench.results import report
    from cudabench.results.compare import compare_documents, describe, parse_threshold
    from cudabench.results.export import load_results

    limit = parse_threshold(threshold)
    console = _check_outputs(json_path, markdown_path)
    old_doc, new_doc = load_results(old), load_results(new)
    comparison = compare_documents(old_doc, new_doc, limit, allow_missing)
    for line in report.environment_differences(old_doc, new_doc):
        say(("note: ", "yellow"), line, console=console)
    if comparison.rows:
        console.print(report.compare_table(comparison))
    else:
        console.print("no subject was measured in both files", style="dim")
    notes = [("only in new: ", comparison.only_new), ("measured in neither: ", comparison.unmeasured)]
    if allow_missing:
        notes.insert(0, ("only in old (allowed): ", comparison.only_old))
    for title, items in notes:
        for line in describe(items):
            say((title, "yellow"), line, console=console)
    for problem in comparison.problems:
        say(("FAIL ", "bold red"), problem, console=err)
    _write_verdicts(comparison, json_path, markdown_path, console)
    raise typer.Exit(comparison.exit_code)


def _check_outputs(json_path: Optional[Path], markdown_path: Optional[Path]) -> Console:
    """Refuse outputs that can never be written, before reading anything; the console for the table:
    standard error when a verdict file goes to standard output, so that stays machine-readable."""
    from cudabench.results.export import check_output_path, writes_to_stdout

    to_stdout = [p for p in (json_path, markdown_path) if writes_to_stdout(p)]
    if len(to_stdout) > 1:
        raise ConfigError("Only one of --json and --markdown can go to standard output.",
                          "Write the other one to a file.")
    for path in (json_path, markdown_path):
        check_output_path(path)
    return err if to_stdout else out


def _write_verdicts(comparison: Any, json_path: Optional[Path], markdown_path: Optional[Path],
                    console: Console) -> None:
    from cudabench.results.compare import to_json, to_markdown
    from cudabench.results.export import write_json_atomic, write_text_atomic, writes_to_stdout

    if json_path:
        write_json_atomic(json_path, to_json(comparison))
    if markdown_path:
        write_text_atomic(markdown_path, to_markdown(comparison))
    for label, path in (("verdicts (JSON)", json_path), ("verdicts (Markdown)", markdown_path)):
        if path and not writes_to_stdout(path):
            console.print(f"{label}: {path}", style="dim")


def plot(
    results: Path = typer.Argument(..., help="Results JSON of a sweep."),
    output: str = typer.Option("cudabench-plot.png", "--output", "-o", help="Image to write, exactly this path; "
                               "its suffix picks the format (.png, .svg, .pdf, ...; none: PNG). - for "
                               "standard output."),
    param: Optional[str] = typer.Option(None, "--param", "-p", help="The swept shape parameter (default: found)."),
) -> None:
    """Time per call against the swept parameter for each kernel, and speedup over the baseline."""
    from cudabench.results.export import load_results, writes_to_stdout
    from cudabench.results.plot import check_image_path, plot_sweep

    check_image_path(output)  # before reading: a wrong path should not wait for a large file
    path = plot_sweep(load_results(results), output, param)
    if writes_to_stdout(output):
        err.print("wrote the plot to standard output", style="dim")
    else:
        out.print(f"wrote {path}")
