"""Compare's verdicts as a reader gets them: one line of text per verdict, a small JSON object, a
Markdown pull-request comment.

`to_json` gives the verdicts as a small object, "cudabench.compare" version 1:

    schema, schema_version, threshold (a fraction: 0.05 is 5 %), memory_threshold, allow_missing, exit_code,
    problems[]      why the exit code is 1, one sentence each (empty when it is 0)
    rows[]          key, subject, role, old_median, new_median (seconds per call), old_n, new_n,
                    ratio (new/old), low, high (its 95 % interval), verdict, regressed, note, gpu
                    (the GPU model matched on; "" when all results share one, or matched across models), old_precision,
                    new_precision (half the recorded 95 % interval of each median, relative; NaN if
                    not recorded), old_memory, new_memory (peak bytes; -1 if not recorded),
                    memory_regressed
    only_old[], only_new[], unmeasured[], failed[]      {key, subject, reason, gpu}: measured in old only,
                    in new only, in neither (or timed differently), INVALID or ERROR
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable

from cudabench.results.compare.verdicts import Comparison, Row, Unmatched, memory_change, on_gpu, percent
from cudabench.results.units import fmt_time


def _change(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.1f}%"


def median_text(median: float, precision: float) -> str:
    """'1.00 ms ±0.3%': a median with half its recorded 95 % interval, when recorded."""

    return fmt_time(median) + (f" ±{precision:.1%}" if precision == precision else "")


def verdict_text(row: Row) -> str:
    """e.g. 'slower +12.3% [+10.1%, +14.0%] REGRESSION' or 'same -0.4% [-1.0%, +0.2%]'."""
    text = f"{row.verdict} {_change(row.ratio)} [{_change(row.low)}, {_change(row.high)}]"
    return text + (" REGRESSION" if row.regressed else "")


def describe(items: Iterable[Unmatched]) -> list[str]:
    """Plain lines for results that could not be compared."""
    return [f"{u.key}{on_gpu(u.gpu)} {u.subject}: {u.reason}" for u in items]


# ---- machine-readable and Markdown verdicts ------------------------------------------------------------

JSON_SCHEMA = "cudabench.compare"
JSON_VERSION = 1


def to_json(comparison: Comparison) -> dict[str, Any]:
    """The verdicts as plain data (documented in the module docstring)."""
    def unmatched(items: Iterable[Unmatched]) -> list[dict[str, str]]:
        return [dataclasses.asdict(u) for u in items]

    return {"schema": JSON_SCHEMA, "schema_version": JSON_VERSION, "threshold": comparison.threshold,
            "memory_threshold": comparison.memory_threshold, "allow_missing": comparison.allow_missing, "exit_code": comparison.exit_code,
            "problems": list(comparison.problems), "rows": [dataclasses.asdict(r) for r in comparison.rows],
            "only_old": unmatched(comparison.only_old), "only_new": unmatched(comparison.only_new),
            "unmeasured": unmatched(comparison.unmeasured), "failed": unmatched(comparison.failed)}


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ") or "-"


def to_markdown(comparison: Comparison) -> str:
    """A pull-request comment: the outcome, the verdict table, then why it fails and what was not compared."""
    outcome = "**FAIL** (exit 1)" if comparison.exit_code else "**pass** (exit 0)"
    lines = [f"**cudabench compare**: {outcome} · threshold {percent(comparison.threshold)} · "
             "interval: 95 % bootstrap of the ratio of medians", ""]
    if comparison.rows:
        memory = any(r.old_memory >= 0 or r.new_memory >= 0 for r in comparison.rows)
        lines += ["| case | kernel | old median | new median | new/old | verdict | " + ("peak memory | " if memory
                                                                                       else "") + "note |",
                  "|---|---|---:|---:|---:|---|" + ("---|" if memory else "") + "---|"]
        for r in comparison.rows:
            text = f"**{verdict_text(r)}**" if r.regressed else verdict_text(r)
            cells = [r.key + on_gpu(r.gpu), r.subject, median_text(r.old_median, r.old_precision),
                     median_text(r.new_median, r.new_precision), f"{r.ratio:.3f}", text]
            if memory:
                cells.append(memory_change(r) + (" **REGRESSION**" if r.memory_regressed else ""))
            cells.append(r.note)
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    else:
        lines.append("No subject was measured in both files.")
    sections = [("Why it fails", list(comparison.problems)),
                ("Measured in old only" + (" (allowed)" if comparison.allow_missing else ""),
                 describe(comparison.only_old) if comparison.allow_missing else []),
                ("Measured in new only", describe(comparison.only_new)),
                ("Not compared", describe(comparison.unmeasured))]
    for title, items in sections:
        if items:
            lines += ["", f"**{title}**", *(f"- {_cell(item)}" for item in items)]
    return "\n".join(lines) + "\n"
