"""Noise-aware comparison of two results documents (see cudabench.results.exporters.json_document): for each subject on each
case measured in both, a bootstrap confidence interval of median(new) / median(old) and a verdict.

Verdict, for the 95 % interval [lo, hi] of the ratio and threshold t (5 % = 0.05), first match wins:

- "same"       the interval lies inside [1/(1+t), 1+t]: any change is smaller than the threshold;
- "slower"     lo > 1: new is slower beyond doubt;
- "faster"     hi < 1: new is faster beyond doubt;
- "too noisy"  otherwise: the interval straddles 1 and reaches past the threshold.

A pair *regresses* when it is "slower" and its point ratio exceeds 1+t. Its peak memory (bytes one call
allocated, recorded with the result) regresses on its own threshold m (10 % by default): when it grew
by more than m and by at least MEMORY_FLOOR (1 MiB; the allocator rounds sizes up, and a few KiB of
scratch is not what the gate is for). Memory is counted, not sampled, so no interval is needed. Testing "same" first makes a
real but sub-threshold change (a CI such as [1.01, 1.02] at t = 5 %, common with many samples and
run-to-run drift) read "same"; it never changes which pairs regress. Pairs with fewer than MIN_SAMPLES
samples on a side are "too noisy". A result is *measured* when its status is ok and it has samples;
results measured on one side only are listed, not dropped; so are pairs timed differently (sync vs
events, hot vs cold), which are not comparable. An INVALID result (it failed an integrity check) or an
ERROR (it crashed or hung) is never compared.

Results are matched by case, subject and GPU model (a result's `gpu`, else its document's): a run
spread over several GPU models compares each model with itself. Two documents from one model each,
different ones (an H100 run against an H200 run), are matched by case and subject alone, as a
deliberate comparison across GPUs; `compare` prints the environment differences above the table.
Each side's recorded 95 % interval of its median (`stats.precision`) is shown beside it; a "too
noisy" verdict says which side was not measured precisely enough.

The exit code is 1 (a CI gate) when any of these holds, else 0:

- a pair regresses, in time or in peak memory;
- either document has no measured result at all (a benchmark that crashed or built nothing);
- a result is INVALID, in either document, or ERROR in the new one;
- a subject measured in old is missing, SKIP, FAIL, ERROR or INVALID in new, unless allow_missing
  (`--allow-missing`), which relaxes only this rule.

The verdicts as text, JSON and Markdown: cudabench.results.compare.render; the bootstrap:
cudabench.results.compare.bootstrap.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, Mapping, Optional

import numpy as np

from cudabench.errors import ConfigError
from cudabench.results.compare.bootstrap import ratio_interval, verdict
from cudabench.results.records.model import UNTRUSTED, sm_clock
from cudabench.results.units import fmt_bytes

MIN_SAMPLES = 3
MEMORY_FLOOR = 1 << 20  # a peak-memory rise smaller than this never counts as a regression
VERDICTS = ("same", "slower", "faster", "too noisy")

Key = tuple[str, str, str]  # (case key, subject, GPU model or "")


@dataclass(frozen=True)
class Row:
    """One subject on one case, measured in both documents."""

    key: str             # the case key, e.g. timex[B=32,C=768,T=768]/fwd
    subject: str
    role: str
    old_median: float    # seconds per call
    new_median: float
    old_n: int
    new_n: int
    ratio: float         # median(new) / median(old): above 1 is slower
    low: float           # confidence interval of the ratio
    high: float
    verdict: str         # one of VERDICTS
    regressed: bool
    note: str = ""       # e.g. the two sides were timed differently
    gpu: str = ""        # the GPU model both ran on ("" when matched across models)
    old_precision: float = math.nan   # half each median's recorded 95 % interval, relative
    new_precision: float = math.nan
    old_memory: int = -1              # peak bytes of one call; -1 when not recorded
    new_memory: int = -1
    memory_regressed: bool = False


@dataclass(frozen=True)
class Unmatched:
    """A result that has samples in one document only."""

    key: str
    subject: str
    reason: str          # why there is nothing to compare it with
    gpu: str = ""


@dataclass(frozen=True)
class Comparison:
    rows: tuple[Row, ...]
    only_old: tuple[Unmatched, ...]    # measured in old only: missing or not measured in new
    only_new: tuple[Unmatched, ...]    # measured in new only
    unmeasured: tuple[Unmatched, ...]  # in both, not comparable (skipped, or timed differently)
    threshold: float
    failed: tuple[Unmatched, ...] = ()  # INVALID in either, ERROR in new: a failure like a regression
    nothing_measured: tuple[str, ...] = ()  # a sentence for each document without a measured result
    allow_missing: bool = False         # only_old does not fail the gate
    memory_threshold: float = 0.10

    @property
    def regressions(self) -> tuple[Row, ...]:
        return tuple(r for r in self.rows if r.regressed)

    @property
    def memory_regressions(self) -> tuple[Row, ...]:
        return tuple(r for r in self.rows if r.memory_regressed)

    @property
    def problems(self) -> tuple[str, ...]:
        """Why the gate fails, one sentence each; empty when it passes."""
        lines = list(self.nothing_measured)
        lines += [f"failed: {u.key}{on_gpu(u.gpu)} {u.subject}: {u.reason}" for u in self.failed]
        if not self.allow_missing:
            failed = {(u.key, u.subject, u.gpu) for u in self.failed}
            lines += [f"missing in new: {u.key}{on_gpu(u.gpu)} {u.subject} was measured in old, now {u.reason}"
                      for u in self.only_old if (u.key, u.subject, u.gpu) not in failed]
        if self.regressions:
            names = ", ".join(f"{r.subject} {r.key}{on_gpu(r.gpu)}" for r in self.regressions)
            lines.append(f"regression beyond {percent(self.threshold)}: {names}")
        if self.memory_regressions:
            names = ", ".join(f"{r.subject} {r.key}{on_gpu(r.gpu)} ({memory_change(r)})" for r in self.memory_regressions)
            lines.append(f"peak memory regression beyond {percent(self.memory_threshold)}: {names}")
        return tuple(lines)

    @property
    def exit_code(self) -> int:
        return 1 if self.problems else 0


def on_gpu(gpu: str) -> str:
    return f" on {gpu}" if gpu else ""


def percent(fraction: float) -> str:
    return f"{fraction * 100:g}%"


def parse_threshold(text: str, option: str = "--threshold") -> float:
    """'5%' -> 0.05 and '0.05' -> 0.05. A bare number of 1 or more is refused as ambiguous
    ('5' could mean 5 % or 500 %); percentages above 100 % are fine ('150%'). `option` names it in errors."""
    t = str(text).strip()
    percent = t.endswith("%")
    try:
        value = float(t[:-1] if percent else t)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"Cannot use {option} '{text}': expected a non-negative percentage or fraction.",
                          f"e.g. {option} 5% (or 0.05)")
    if not percent and value >= 1:
        raise ConfigError(f"{option} '{text}' is ambiguous: a fraction must be below 1.",
                          f"Write {t}% for {t} percent, or a fraction such as 0.05.")
    return value / 100 if percent else value


# ---- documents -----------------------------------------------------------------------------------



def _failure(result: Optional[Mapping[str, Any]], side: str = "") -> Optional[str]:
    """Why a result cannot be trusted (INVALID: its failed integrity checks; ERROR: its error)."""
    if not isinstance(result, Mapping) or result.get("status") not in UNTRUSTED:
        return None
    failed = [f"{i.get('name')}: {i.get('detail')}" for i in result.get("integrity") or []
              if isinstance(i, Mapping) and i.get("verdict") == "fail"]
    where = f" in {side}" if side else ""
    return f"{result['status']}{where}: " + ("; ".join(failed) or str(result.get("error") or "no reason recorded"))


def measured_samples(result: Mapping[str, Any]) -> Optional[np.ndarray]:
    """The samples of a measured result: status ok (not SKIP, FAIL, ERROR, INVALID) and positive times."""
    if result.get("status", "ok") != "ok":
        return None  # not run, wrong, crashed or untrustworthy: not a figure anyone should compare
    values = (result.get("measurement") or {}).get("samples") or []
    try:
        xs = np.array([float(v) for v in values], dtype=np.float64)
    except (TypeError, ValueError):
        return None  # not numbers: treated as unmeasured
    xs = xs[np.isfinite(xs) & (xs > 0)]
    return xs if xs.size else None


def _nothing_measured(doc: Mapping[str, Any], side: str) -> list[str]:
    """A sentence when `doc` has no measured result, saying what it has instead."""
    results = list(doc.get("results", []))
    if any(measured_samples(r) is not None for r in results):
        return []
    statuses = Counter(str(r.get("status") or "no status") for r in results)
    has = ", ".join(f"{n} {status}" for status, n in statuses.items()) if results else "no results at all"
    return [f"nothing measured in {side}: the {side} results have no measured result ({has})"]


def gpu_models(doc: Mapping[str, Any]) -> set[str]:
    return {_model(doc, r) for r in doc.get("results", [])} - {""}


def _model(doc: Mapping[str, Any], result: Mapping[str, Any]) -> str:
    return str(result.get("gpu") or (doc.get("environment") or {}).get("gpu") or "")


def _by_key(doc: Mapping[str, Any], per_model: bool) -> dict[Key, Mapping[str, Any]]:
    """Results by (case key, subject, GPU model), in document order; a repeated one keeps its last
    copy. A result without a GPU (skipped before it ran) takes the model its case ran on."""
    results = list(doc.get("results", []))
    ran_on = {r["case"]["key"]: _model(doc, r) for r in results if _model(doc, r)}
    found = {}
    for r in results:
        model = (_model(doc, r) or ran_on.get(r["case"]["key"], "")) if per_model else ""
        found[(r["case"]["key"], r["subject"], model)] = r
    return found


def _precision(result: Mapping[str, Any]) -> float:
    value = (result.get("stats") or {}).get("precision")
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _why_not_measured(result: Optional[Mapping[str, Any]], side: str) -> str:
    if result is None:
        return f"not in the {side} results"
    if _failure(result):
        return f"{_failure(result)} in {side}"
    status = result.get("status")
    status = "no samples" if status in (None, "ok") else status
    return f"{status} in {side}" + (f": {result['skipped']}" if result.get("skipped") else "")


def _timing(result: Mapping[str, Any]) -> str:
    m = result.get("measurement") or {}
    return f"{m.get('timing', '?')}/{m.get('cache', '?')}"


def memory_regressed(old_bytes: int, new_bytes: int, threshold: float) -> bool:
    """Both recorded, and new above old by more than the threshold and by at least MEMORY_FLOOR."""
    if old_bytes < 0 or new_bytes < 0:
        return False
    return new_bytes - old_bytes >= MEMORY_FLOOR and new_bytes > old_bytes * (1 + threshold)


def memory_change(row: Row) -> str:
    """'96.0 MiB → 192 MiB (+100.0%)', or '-' when either side was not recorded."""

    if row.old_memory < 0 or row.new_memory < 0:
        return "-"
    change = f" ({(row.new_memory / row.old_memory - 1) * 100:+.1f}%)" if row.old_memory > 0 else ""
    return f"{fmt_bytes(row.old_memory)} → {fmt_bytes(row.new_memory)}{change}"


def compare_pair(old: Mapping[str, Any], new: Mapping[str, Any], xs_old: np.ndarray, xs_new: np.ndarray,
                 threshold: float, gpu: str = "", memory_threshold: float = 0.10) -> Row:
    """Verdict for one subject on one case; both sides have samples."""
    ratio = float(np.median(xs_new) / np.median(xs_old))
    low, high = ratio_interval(xs_old, xs_new)
    few = min(xs_old.size, xs_new.size) < MIN_SAMPLES
    said = "too noisy" if few else verdict(low, high, threshold)
    precision = {"old": _precision(old), "new": _precision(new)}
    notes = [f"fewer than {MIN_SAMPLES} samples"] if few else []
    if said == "too noisy":  # say which side's median is not known well enough to decide
        vague = [f"{side} median ±{p:.1%}" for side, p in precision.items() if p == p and p > threshold / 2]
        notes += vague and [", ".join(vague) + " (95 %): measure again with a smaller --noise or a longer --max-time"]
    notes += [clocks] if (clocks := clock_change(old, new)) and said in ("slower", "faster") else []
    old_bytes, new_bytes = int(old.get("peak_memory", -1)), int(new.get("peak_memory", -1))
    return Row(new["case"]["key"], new["subject"], new.get("role", ""), float(np.median(xs_old)),
               float(np.median(xs_new)), int(xs_old.size), int(xs_new.size), ratio, low, high, said,
               said == "slower" and ratio > 1 + threshold, "; ".join(notes), gpu, precision["old"], precision["new"],
               old_bytes, new_bytes, memory_regressed(old_bytes, new_bytes, memory_threshold))


CLOCK_CHANGE = 0.02  # SM clocks this far apart may explain a verdict


def clock_change(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """'SM clock 1980 -> 1755 MHz (-11.4%), which may explain it' where the two runs' SM clocks while
    sampling differ by more than CLOCK_CHANGE; '' otherwise or where either was not recorded."""
    sm = [sm_clock((r.get("measurement") or {}).get("clocks") or {})[0] for r in (old, new)]
    if not all(sm) or abs(sm[1] / sm[0] - 1) <= CLOCK_CHANGE:
        return ""
    return f"SM clock {sm[0]:.0f} -> {sm[1]:.0f} MHz ({sm[1] / sm[0] - 1:+.1%}), which may explain it"


def _failures(olds: Mapping[Key, Mapping[str, Any]], news: Mapping[Key, Mapping[str, Any]]) -> list[Unmatched]:
    """INVALID results on either side and ERROR results in new: failures whatever else happened."""
    failed = [_unmatched(key, _failure(r, "old")) for key, r in olds.items() if r.get("status") == "INVALID"]
    return failed + [_unmatched(key, _failure(r)) for key, r in news.items() if _failure(r)]


def _unmatched(key: Key, reason: str) -> Unmatched:
    case, subject, gpu = key
    return Unmatched(case, subject, reason, gpu)


def compare_documents(old: Mapping[str, Any], new: Mapping[str, Any], threshold: float = 0.05,
                      allow_missing: bool = False, memory_threshold: float = 0.10) -> Comparison:
    """Match results by (case key, subject, GPU model) and give each pair measured on both sides a
    verdict; `allow_missing` lets subjects measured in old only pass the gate (see the module docstring)."""
    models_old, models_new = gpu_models(old), gpu_models(new)
    across = len(models_old) == 1 and len(models_new) == 1 and models_old != models_new
    per_model = len(models_old | models_new) > 1 and not across  # one model in all: nothing to tell apart
    olds, news = _by_key(old, per_model), _by_key(new, per_model)
    rows: list[Row] = []
    only_old: list[Unmatched] = []
    only_new: list[Unmatched] = []
    unmeasured: list[Unmatched] = []
    failed = _failures(olds, news)
    for key in dict.fromkeys([*olds, *news]):
        a, b = olds.get(key), news.get(key)
        xa, xb = (measured_samples(a) if a else None), (measured_samples(b) if b else None)
        if xa is not None and xb is not None and _timing(a) != _timing(b):
            unmeasured.append(_unmatched(key, f"not comparable: timed as {_timing(a)} in old, {_timing(b)} in new"))
        elif xa is not None and xb is not None:
            rows.append(compare_pair(a, b, xa, xb, threshold, key[2], memory_threshold))
        elif xa is not None:
            only_old.append(_unmatched(key, _why_not_measured(b, "new")))
        elif xb is not None:
            only_new.append(_unmatched(key, _why_not_measured(a, "old")))
        else:
            unmeasured.append(_unmatched(key, f"{_why_not_measured(a, 'old')}; {_why_not_measured(b, 'new')}"))
    nothing = _nothing_measured(old, "old") + _nothing_measured(new, "new")
    return Comparison(tuple(rows), tuple(only_old), tuple(only_new), tuple(unmeasured), threshold, tuple(failed),
                      tuple(nothing), allow_missing, memory_threshold)
