"""One flat row per result of a results document: the figures the CSV, Markdown and HTML exports
share, computed once (times in seconds, rates from the kernel time where CUPTI measured it)."""

from __future__ import annotations

import math
from typing import Any, Mapping, Optional


COLUMNS = ("family", "shape", "direction", "dtype", "subject", "role", "status", "rel_error", "median", "ci_low",
           "ci_high", "q1", "q3", "min", "mean", "stdev", "n", "kernel_time", "kernels_per_call", "tflops", "gbps",
           "ceiling", "peak_memory", "timing", "cache", "skipped")
TIME_COLUMNS = ("median", "ci_low", "ci_high", "q1", "q3", "min", "mean", "stdev")  # ci: the median's 95 %


def _number(value: Any) -> Optional[float]:
    return None if value is None else float(value)  # float() also reads the "nan"/"inf" strings


def _count(value: Any) -> Optional[float | int]:
    """A count stored as a float in measurement.extra: 2.0 reads 2, a fractional mean stays as it is."""
    number = _number(value)
    return int(number) if number is not None and number.is_integer() else number


def memory_of(result: Mapping[str, Any]) -> Optional[int]:
    """A result's peak memory in bytes, None when it was not measured."""
    value = result.get("peak_memory", -1)
    return None if value is None or int(value) < 0 else int(value)


def _worst_error(check: Optional[Mapping[str, Any]]) -> Optional[float]:
    errors = [float(e) for e in ((check or {}).get("errors") or {}).values()]
    if not errors:
        return None
    return math.nan if any(e != e for e in errors) else max(errors)


def _why(r: Mapping[str, Any]) -> str:
    """Why a result is not a trusted figure: its skip reason, its error, or its failed integrity checks."""
    failed = [f"{i.get('name')}: {i.get('detail')}" for i in (r.get("integrity") or []) if isinstance(i, dict)
              and i.get("verdict") == "fail"]
    return r.get("skipped") or r.get("error") or "; ".join(failed)


def _rate(amount: Any, seconds: Optional[float], unit: float) -> Optional[float]:
    amount = _number(amount)
    return amount / seconds / unit if amount and seconds else None


def flat_rows(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One flat record per result, keyed by COLUMNS; times in seconds (kernel_time: the GPU kernels'
    own time per call, from CUPTI), None where not measured. tflops and gbps are the family's count
    over the kernel time where CUPTI measured it (as the table), else over the median; ceiling is the
    share of the device ceiling that bounds the family (0.5 for 50 %)."""
    rows = []
    for r in doc.get("results", []):
        case, stats, m = r["case"], r.get("stats") or {}, r.get("measurement") or {}
        extra = m.get("extra") or {}
        row = {"family": case["family"], "shape": ",".join(f"{k}={v}" for k, v in case["shape"].items()),
               "direction": case["direction"], "dtype": case.get("dtype", "float32"), "subject": r["subject"],
               "role": r.get("role"),
               "status": r.get("status"), "rel_error": _worst_error(r.get("check")), "n": stats.get("n"),
               "kernel_time": _number(extra.get("kernel_time_cupti")),
               "kernels_per_call": _count(extra.get("kernels_per_call")),
               "peak_memory": memory_of(r),
               "timing": m.get("timing"), "cache": m.get("cache"), "skipped": _why(r)}
        row.update({c: _number(stats.get(c)) for c in TIME_COLUMNS})
        seconds = row["kernel_time"] or row["median"]
        row.update(tflops=_rate(r.get("flops"), seconds, 1e12), gbps=_rate(r.get("bytes"), seconds, 1e9),
                   ceiling=_number(extra.get("ceiling_fraction")))
        rows.append(row)
    return rows
