"""The Markdown export: a GitHub table of the results under a line naming the GPU, driver, CUDA,
torch and date. Figures of an INVALID or crashed subject are struck through."""

from __future__ import annotations

from typing import Any, Mapping

from cudabench.results.units import fmt_bytes, fmt_error, fmt_time
from cudabench.results.exporters.rows import TIME_COLUMNS, flat_rows
from cudabench.results.records.model import UNTRUSTED


def markdown_header(doc: Mapping[str, Any]) -> str:
    env = doc.get("environment") or {}
    gpu = env.get("gpu") or "no GPU"
    if env.get("capability"):
        gpu += f" (sm_{env['capability'].replace('.', '')})"
    parts = [f"**GPU** {gpu}", f"**driver** {env.get('driver') or '-'}",
             f"**CUDA** {env.get('cuda_runtime') or '-'}", f"**torch** {env.get('torch') or '-'}",
             f"**cudabench** {env.get('cudabench') or '-'}", f"**date** {env.get('date') or '-'}"]
    line = " · ".join(parts)
    return line + (f"  \n`{doc['command']}`" if doc.get("command") else "")


def _rates(row: Mapping[str, Any]) -> list[str]:
    """TFLOP/s, GB/s and % ceiling as the table shows them."""
    tflops, gbps, ceiling = row["tflops"], row["gbps"], row["ceiling"]
    return ["-" if tflops is None else f"{tflops:.2f}", "-" if gbps is None else f"{gbps:.0f}",
            "-" if ceiling is None else f"{ceiling:.0%}"]


def to_markdown(doc: Mapping[str, Any]) -> str:
    """A GitHub table of the results under a line with GPU, driver, CUDA, torch and date."""
    head = ["family", "shape", "dir", "dtype", "subject", "role", "status", "rel err", "median", "ci low", "ci high", "q1",
            "q3", "min", "mean", "stdev", "n", "kernel time", "kernels/call", "TFLOP/s", "GB/s", "% ceiling",
            "peak memory", "timing", "cache"]
    numeric = (*TIME_COLUMNS, "ci low", "ci high", "n", "rel err", "kernel time", "kernels/call", "TFLOP/s", "GB/s",
               "% ceiling", "peak memory")
    lines = [markdown_header(doc), "", "| " + " | ".join(head) + " |",
             "|" + "|".join("---:" if h in numeric else "---" for h in head) + "|"]
    for row in flat_rows(doc):
        err, per_call = row["rel_error"], row["kernels_per_call"]
        figures = [*(fmt_time(row[c]) for c in TIME_COLUMNS), "-" if row["n"] is None else str(row["n"]),
                   fmt_time(row["kernel_time"]), "-" if per_call is None else f"{per_call:g}", *_rates(row)]
        if row["status"] in UNTRUSTED:  # kept for the record, struck through: never read as a result
            figures = [f"~~{f}~~" if f not in ("", "-") else f for f in figures]
        cells = [row["family"], row["shape"], row["direction"], row["dtype"], row["subject"], row["role"], row["status"],
                 "-" if err is None else fmt_error(err), *figures, fmt_bytes(row["peak_memory"]),
                 row["timing"] or "-",
                 row["cache"] or "-"]
        lines.append("| " + " | ".join(str(c or "-").replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"
