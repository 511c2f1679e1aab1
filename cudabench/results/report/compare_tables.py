"""Rich tables of compare (the verdict per subject, the environment differences) and history (one
subject across stored runs)."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from cudabench.results.compare.render import median_text, verdict_text
from cudabench.results.compare.verdicts import memory_change


VERDICT_STYLE = {"same": "green", "faster": "bold green", "slower": "bold red", "too noisy": "yellow"}


def compare_table(comparison: Any) -> Table:
    """One row per case and subject measured in both files: medians, ratio, its 95 % interval."""

    memory = any(r.old_memory >= 0 or r.new_memory >= 0 for r in comparison.rows)
    table = Table(title=f"new vs old (threshold {comparison.threshold:.0%}"
                        + (f", peak memory {comparison.memory_threshold:.0%}" if memory else "")
                        + "; interval: 95 % bootstrap of the ratio of medians)", title_justify="left",
                  header_style="bold")
    columns = ("case", "kernel", "old median", "new median", "new/old", "verdict", *(["peak memory"] if memory else []),
               "note")
    for col in columns:
        table.add_column(col, justify="right" if col in ("old median", "new median", "new/old") else "left")
    for r in comparison.rows:
        cells = [r.key + (f" on {r.gpu}" if r.gpu else ""), r.subject, median_text(r.old_median, r.old_precision),
                 median_text(r.new_median, r.new_precision), f"{r.ratio:.3f}",
                 Text(verdict_text(r), style=VERDICT_STYLE.get(r.verdict, ""))]
        if memory:
            cells.append(Text(memory_change(r) + (" REGRESSION" if r.memory_regressed else ""),
                              style="bold red" if r.memory_regressed else ""))
        table.add_row(*cells, r.note)
    return table


def environment_differences(old: dict, new: dict) -> list[str]:
    """What differs between the two runs' machines and software (a reason for a difference)."""
    lines = []
    a, b = old.get("environment", {}), new.get("environment", {})
    for key in ("gpu", "driver", "torch", "cuda_runtime", "cudabench"):
        if a.get(key) != b.get(key):
            lines.append(f"{key} differs: {a.get(key)} (old) vs {b.get(key)} (new)")
    changed = sorted(f for f, h in new.get("source_hashes", {}).items()
                     if old.get("source_hashes", {}).get(f, h) != h)
    if changed:
        lines.append("kernel sources changed: " + ", ".join(changed))
    return lines


def history_tables(histories: Any) -> list[Table]:
    """One table per (GPU, case, subject): its median per stored run, oldest first, and the verdict
    against the run before (a change point where it got slower or faster)."""

    tables = []
    for (gpu, key, subject), steps in histories.items():
        table = Table(title=f"{subject}  {key}" + (f"  on {gpu}" if gpu else ""), title_justify="left",
                      header_style="bold")
        for col in ("run", "commit", "date", "median", "vs run before", "verdict"):
            table.add_column(col, justify="right" if col in ("run", "median", "vs run before") else "left")
        for step in steps:
            run = step.point.run
            verdict = Text(("CHANGE: " if step.changed else "") + step.verdict,
                           style=VERDICT_STYLE.get(step.verdict, "")) if step.verdict else Text("")
            table.add_row(str(run.id), run.label(), run.created[:19].replace("T", " "),
                          median_text(step.median, step.precision),
                          f"{step.ratio:.3f}" if step.verdict else "", verdict)
        tables.append(table)
    return tables
