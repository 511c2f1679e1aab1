"""`cudabench compare` and `cudabench plot`: reading results files."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from cudabench.cli.common import err, out, say


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
        say(("note: ", "yellow"), line)
    out.print(report.compare_table(comparison))
    for title, items in (("only in old", comparison.only_old), ("only in new", comparison.only_new),
                         ("measured in neither", comparison.unmeasured)):
        for line in describe(items):
            say((f"{title}: ", "yellow"), line)
    for line in describe(comparison.failed):
        say(("failed in new: ", "bold red"), line, console=err)
    if comparison.regressions:
        names = ", ".join(f"{r.subject} {r.key}" for r in comparison.regressions)
        say(("regression", "bold red"), f" beyond {limit:.0%}: {names}", console=err)
    raise typer.Exit(comparison.exit_code)


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
