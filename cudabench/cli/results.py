"""`cudabench compare`, `cudabench history` and `cudabench plot`: reading results files and the store."""

# Imports inside the commands are deliberate: every command module is loaded at start-up (for
# `cudabench --help` too), so each command imports what it uses when it runs.

from __future__ import annotations

from pathlib import Path
from typing import Any, List, Optional

import typer
from rich.console import Console

from cudabench.cli.common import detail, err, out, say
from cudabench.errors import ConfigError


STORE_DEFAULT = "(default: $CUDABENCH_STORE or .cudabench/results.db at the top of the git work tree)."
STORE_HELP = "The results store that @references read " + STORE_DEFAULT


def compare(
    old: str = typer.Argument(..., help="Results JSON of the reference run, or a stored run: @latest, "
                              "@latest~1, @COMMIT, @HEAD~1 (anything git names)."),
    new: str = typer.Argument(..., help="Results JSON of the run to judge, or a stored run (@...)."),
    threshold: str = typer.Option("5%", "--threshold", "-t", help="Smallest change that counts (5% or 0.05)."),
    memory_threshold: str = typer.Option("10%", "--memory-threshold", help="Smallest rise of a subject's peak "
                                         "memory that counts as a regression (and at least 1 MiB)."),
    allow_missing: bool = typer.Option(False, "--allow-missing", help="Pass even when a subject measured in old "
                                       "is missing, skipped or failed in new (never when one is INVALID or "
                                       "crashed, nor when new has nothing measured)."),
    json_path: Optional[Path] = typer.Option(None, "--json", help="Also write the verdicts as JSON here "
                                             "(- for standard output)."),
    markdown_path: Optional[Path] = typer.Option(None, "--markdown", help="Also write the verdicts as a Markdown "
                                                 "table here, e.g. for a pull-request comment (- for standard "
                                                 "output)."),
    store: Optional[Path] = typer.Option(None, "--store", help=STORE_HELP),
) -> None:
    """Noise-aware verdicts per case (bootstrap interval of the ratio of medians). Exit 1 when a case
    is slower beyond the threshold, its peak memory grew beyond the memory threshold, a subject measured in old is not measured in new, a result is
    INVALID or crashed, or a file has nothing measured: usable as a CI gate. With --json - or
    --markdown -, standard output carries only that; the table and notes go to standard error."""
    from cudabench.results.report import compare_tables
    from cudabench.results.compare.render import describe
    from cudabench.results.compare.verdicts import compare_documents, parse_threshold

    limit, memory_limit = parse_threshold(threshold), parse_threshold(memory_threshold, "--memory-threshold")
    console = _check_outputs(json_path, markdown_path, inputs=[w for w in (old, new) if not w.startswith("@")]
                             + [store or _default_store()])
    (old_doc, old_run), (new_doc, new_run) = _load(old, store), _load(new, store)
    if old_run is not None and old_run == new_run:
        raise ConfigError(f"{old} and {new} name the same stored run (run {old_run}).",
                          "`cudabench history` lists the stored runs and their commits.")
    if old_run is None and new_run is None and _same_file(old, new):
        raise ConfigError(f"{old} and {new} are the same file: every case would compare equal.",
                          "Give the results of two runs (old first).")
    comparison = compare_documents(old_doc, new_doc, limit, allow_missing, memory_limit)
    for side, where, doc in (("old", old, old_doc), ("new", new, new_doc)):
        if not doc.get("complete", True):
            say(("note: ", "yellow"), f"the {side} run ({where}) did not finish (interrupted, or still going "
                f"when written): it has {len(doc['results'])} result(s), and what it did not reach is missing.",
                console=console)
    for line in compare_tables.environment_differences(old_doc, new_doc):
        say(("note: ", "yellow"), line, console=console)
    if comparison.rows:
        console.print(compare_tables.compare_table(comparison))
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


def _same_file(a: str, b: str) -> bool:
    try:
        return Path(a).samefile(b)
    except OSError:
        return False


def _load(where: str, store: Optional[Path]) -> tuple[dict, Optional[int]]:
    """A results document from a file, or from the store for `@REF` (with its run's id)."""
    from cudabench.results.store.database import load_run

    return load_run(where, store)


def history(
    kernel: Optional[List[str]] = typer.Option(None, "--kernel", "-k", help="Kernel or family (repeatable; "
                                               "default: every stored subject)."),
    case: str = typer.Option("", "--case", help="Only cases whose key contains this, e.g. T=768 or /fwdbwd."),
    gpu: str = typer.Option("", "--gpu", help="Only results on GPU models whose name contains this, e.g. H100."),
    threshold: str = typer.Option("5%", "--threshold", "-t", help="Smallest change that counts (5% or 0.05)."),
    plot_path: Optional[str] = typer.Option(None, "--plot", help="Also draw the medians over the runs into this "
                                            "image (.png, .svg, .pdf)."),
    store: Optional[str] = typer.Option(None, "--store", help="The results store whose runs make the history "
                                        + STORE_DEFAULT),
) -> None:
    """A subject's median over the stored runs, oldest first, each judged against the run before with
    compare's noise-aware test: the change points are where it got slower or faster."""
    from cudabench.results.report import compare_tables
    from cudabench.results.compare.verdicts import parse_threshold
    from cudabench.results.store.history import select, series
    from cudabench.results.store.access import default_path
    from cudabench.results.store.database import Store

    limit = parse_threshold(threshold)
    path = Path(store) if store else default_path()
    if plot_path:
        from cudabench.outputs import check_outputs
        from cudabench.results.plots.sweep import check_image_path

        check_image_path(plot_path)
        check_outputs([plot_path], [path])  # a plot path that is the store (a link to it) would replace it
    if not path.exists():
        raise ConfigError(f"There is no results store at {path}.",
                          "Record runs with `cudabench run ... --store`, or name the store with --store PATH.")
    with Store(path, read_only=True) as opened:
        found = series(select(opened.points(), kernel or (), case, gpu), limit)
    if not found:
        raise ConfigError(f"No measured result in {path} matches.", "`cudabench history` alone lists them all.")
    for table in compare_tables.history_tables(found):
        out.print(table)
    changes = sum(step.changed for steps in found.values() for step in steps)
    detail(f"{len(found)} series, {changes} change point(s) beyond {threshold} (store: {path})")
    if plot_path:
        from cudabench.results.plots.sweep import plot_history

        out.print(f"wrote {plot_history(found, plot_path)}")


def report_cmd(
    html_path: Path = typer.Option(..., "--html", help="The page to write: one self-contained HTML file (no "
                                   "server, no network), e.g. a CI artifact."),
    results: Optional[Path] = typer.Option(None, "--results", help="Report this results JSON (default: the "
                                           "store's latest run)."),
    store: Optional[str] = typer.Option(None, "--store", help=STORE_HELP + " Its runs give the history "
                                        "section."),
) -> None:
    """One HTML page: the run's tables, its sweep plot, and its subjects' history across the stored runs."""
    from cudabench.outputs import check_outputs
    from cudabench.results.exporters.json_document import load_results
    from cudabench.outputs import write_text_atomic
    from cudabench.results.report.html import page
    from cudabench.results.store.access import default_path

    path = Path(store) if store else default_path()
    check_outputs([html_path], [results, path])
    if results is None and not path.exists():
        raise ConfigError(f"Nothing to report: no --results file and no results store at {path}.",
                          "Give --results FILE.json, or record runs with `cudabench run ... --store`.")
    doc = load_results(results) if results else _load("@latest", path)[0]
    source = str(results) if results else f"{path} @latest"
    history = _history_of(doc, path) if path.exists() else {}
    figures, left_out = _report_figures(doc, history)
    write_text_atomic(html_path, page(doc, figures, history, source, left_out))
    for line in left_out:
        if "matplotlib" in line:
            say(("note: ", "yellow"), line, console=err)
    out.print(f"wrote {html_path} ({len(doc.get('results', []))} results, {len(figures)} plot(s), "
              f"{len(history)} history series)")


def _history_of(doc: dict, path: Path) -> dict:
    """History series (see cudabench.results.store.history) of the subjects and cases `doc` measured."""
    from cudabench.results.store.history import select, series
    from cudabench.results.store.database import Store

    wanted = {(r["case"]["key"], r["subject"]) for r in doc.get("results", [])}
    with Store(path, read_only=True) as opened:
        points = [p for p in select(opened.points()) if (p.result["case"]["key"], p.result["subject"]) in wanted]
    return series(points, 0.05)


def _report_figures(doc: dict, history: dict) -> tuple[list, list[str]]:
    """The sweep plot (where a parameter varies) and the history plot, as PNG bytes; why each one left
    out is left out, in words for the page."""
    import tempfile

    from cudabench.errors import ToolNotFoundError
    from cudabench.results.report.html import Figure
    from cudabench.results.plots.sweep import plot_history, plot_sweep

    figures, left_out = [], []
    with tempfile.TemporaryDirectory() as tmp:
        image = Path(tmp) / "figure.png"
        try:
            try:
                figures.append(Figure("sweep", plot_sweep(doc, image).read_bytes()))
            except ConfigError:
                left_out.append("No sweep plot: no shape parameter varies within a case of this run.")
            if history:
                figures.append(Figure("history", plot_history(history, image).read_bytes()))
            else:
                left_out.append("No history plot: the store holds no earlier run of these subjects (record runs "
                                "with `cudabench run ... --store`).")
        except ToolNotFoundError:
            return [], ['Plots left out: matplotlib is not installed (pip install "cudabench[plot]").']
    return figures, left_out


def _check_outputs(json_path: Optional[Path], markdown_path: Optional[Path], inputs: list) -> Console:
    """Refuse outputs that can never be written or would overwrite an input, before reading anything;
    the console for the table: standard error when a verdict file goes to standard output, so that
    stays machine-readable."""
    from cudabench.outputs import check_outputs
    from cudabench.outputs import writes_to_stdout

    to_stdout = [p for p in (json_path, markdown_path) if writes_to_stdout(p)]
    if len(to_stdout) > 1:
        raise ConfigError("Only one of --json and --markdown can go to standard output.",
                          "Write the other one to a file.")
    check_outputs([json_path, markdown_path], inputs)  # a regular file: the atomic write would replace a device
    return err if to_stdout else out


def _default_store() -> Path:
    from cudabench.results.store.access import default_path

    return default_path()


def _write_verdicts(comparison: Any, json_path: Optional[Path], markdown_path: Optional[Path],
                    console: Console) -> None:
    from cudabench.results.compare.render import to_json, to_markdown
    from cudabench.results.exporters.json_document import write_json_atomic
    from cudabench.outputs import write_text_atomic, writes_to_stdout

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
    from cudabench.outputs import check_outputs
    from cudabench.results.exporters.json_document import load_results
    from cudabench.outputs import writes_to_stdout
    from cudabench.results.plots.sweep import check_image_path, plot_sweep

    check_image_path(output)  # before reading: a wrong path should not wait for a large file
    check_outputs([output], [results])
    path = plot_sweep(load_results(results), output, param)
    if writes_to_stdout(output):
        err.print("wrote the plot to standard output", style="dim")
    else:
        out.print(f"wrote {path}")


def show(
    results: Path = typer.Argument(..., help="A results JSON (as `run --json` writes it); - for standard input."),
    wide: bool = typer.Option(False, "--wide", help="Every figure, as `run --wide` prints it."),
) -> None:
    """Print a results file's tables and notes the way `run` printed them: read a CI log's or a
    colleague's run without a GPU."""
    from cudabench.results.report import terminal as report
    from cudabench.results.exporters.json_document import load_results, result_from_dict, run_time_from
    from cudabench.results.records.model import Environment

    doc = load_results(results, allow_stdin=True)
    runs = [result_from_dict(r) for r in doc["results"]]
    env = doc.get("environment") or {}
    fields = {k: v for k, v in env.items() if k in Environment.__dataclass_fields__ and k != "settings"}
    detail(report.environment_line(Environment(**fields)) + f" · {doc.get('command', '')}")
    for table in report.tables(runs, wide):
        out.print_table(table)
    for line in report.notes(runs):
        say(line, console=out)
    run_time = run_time_from(doc)
    if run_time is not None and runs:
        detail(report.time_breakdown(runs, run_time))
    if not doc.get("complete", True):
        say(("note: ", "yellow"), "this run did not finish: what it did not reach is missing.", console=err)
