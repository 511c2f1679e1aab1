"""Noise-aware comparison of two results documents (see cudabench.results.export): for each subject on each
case measured in both, a bootstrap confidence interval of median(new) / median(old) and a verdict.

Verdict, for the 95 % interval [lo, hi] of the ratio and threshold t (5 % = 0.05), first match wins:

- "same"       the interval lies inside [1/(1+t), 1+t]: any change is smaller than the threshold;
- "slower"     lo > 1: new is slower beyond doubt;
- "faster"     hi < 1: new is faster beyond doubt;
- "too noisy"  otherwise: the interval straddles 1 and reaches past the threshold.

A pair *regresses* when it is "slower" and its point ratio exceeds 1+t; any regression makes the
exit code 1 (a CI gate). Testing "same" first makes a real but sub-threshold change (a CI such as
[1.01, 1.02] at t = 5 %, common with many samples and run-to-run drift) read "same"; it never
changes which pairs regress. Pairs with fewer than MIN_SAMPLES samples on a side are "too noisy".
Results measured on one side only (absent, skipped or failed on the other) are listed, not dropped;
so are pairs timed differently (sync vs events, hot vs cold), which are not comparable. A result
that is INVALID (it failed an integrity check) or ERROR (it crashed or hung) is never compared:
in the new document it is a failure, and the exit code is 1 as for a regression.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional

import numpy as np

from cudabench.errors import ConfigError

RESAMPLES = 2000
CONFIDENCE = 0.95
SEED = 20240601       # fixed: the same two files always give the same verdicts
MIN_SAMPLES = 3
VERDICTS = ("same", "slower", "faster", "too noisy")

Key = tuple[str, str]  # (case key, subject)


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


@dataclass(frozen=True)
class Unmatched:
    """A result that has samples in one document only."""

    key: str
    subject: str
    reason: str          # why there is nothing to compare it with


@dataclass(frozen=True)
class Comparison:
    rows: tuple[Row, ...]
    only_old: tuple[Unmatched, ...]    # measured in old only
    only_new: tuple[Unmatched, ...]    # measured in new only
    unmeasured: tuple[Unmatched, ...]  # in both, not comparable (skipped, or timed differently)
    threshold: float
    failed: tuple[Unmatched, ...] = ()  # INVALID or ERROR in new: a failure like a regression

    @property
    def regressions(self) -> tuple[Row, ...]:
        return tuple(r for r in self.rows if r.regressed)

    @property
    def exit_code(self) -> int:
        return 1 if self.regressions or self.failed else 0


def parse_threshold(text: str) -> float:
    """'5%' -> 0.05 and '0.05' -> 0.05. A bare number of 1 or more is refused as ambiguous
    ('5' could mean 5 % or 500 %); percentages above 100 % are fine ('150%')."""
    t = str(text).strip()
    percent = t.endswith("%")
    try:
        value = float(t[:-1] if percent else t)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"Cannot use threshold '{text}': expected a non-negative percentage or fraction.",
                          "e.g. --threshold 5% (or 0.05)")
    if not percent and value >= 1:
        raise ConfigError(f"Threshold '{text}' is ambiguous: a fraction must be below 1.",
                          f"Write {t}% for {t} percent, or a fraction such as 0.05.")
    return value / 100 if percent else value


# ---- statistics ----------------------------------------------------------------------------------

def bootstrap_medians(samples: np.ndarray, rng: np.random.Generator, count: int = RESAMPLES) -> np.ndarray:
    """Medians of `count` bootstrap resamples (n draws with replacement) of `samples`, drawn
    exactly without building the resamples: the k-th smallest of n uniform draws is
    Beta(k, n+1-k)-distributed, and floor(n·u) maps uniform draws to resampled positions in
    order. Costs a sort plus O(count): milliseconds even for 100 000 samples."""
    xs = np.sort(np.asarray(samples, dtype=np.float64))
    n = xs.size
    k = (n + 1) // 2                       # the (lower) middle order statistic, 1-based
    u_k = rng.beta(k, n + 1 - k, size=count)
    if n % 2:
        return xs[_position(u_k, n)]
    # even n: the next order statistic is the smallest of the n-k draws above u_k
    u_next = u_k + (1 - u_k) * rng.beta(1, n - k, size=count)
    return (xs[_position(u_k, n)] + xs[_position(u_next, n)]) / 2


def _position(u: np.ndarray, n: int) -> np.ndarray:
    return np.minimum((u * n).astype(np.int64), n - 1)


def ratio_interval(old: np.ndarray, new: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Percentile bootstrap interval of median(new) / median(old); deterministic (fixed seed)."""
    rng = np.random.default_rng(SEED)
    ratios = bootstrap_medians(new, rng) / bootstrap_medians(old, rng)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return float(low), float(high)


def verdict(low: float, high: float, threshold: float) -> str:
    if 1 / (1 + threshold) <= low and high <= 1 + threshold:
        return "same"
    if low > 1:
        return "slower"
    if high < 1:
        return "faster"
    return "too noisy"


# ---- documents -----------------------------------------------------------------------------------

UNTRUSTED = ("INVALID", "ERROR")


def _failure(result: Optional[Mapping[str, Any]]) -> Optional[str]:
    """Why a result cannot be trusted (INVALID: its failed integrity checks; ERROR: its error)."""
    if not isinstance(result, Mapping) or result.get("status") not in UNTRUSTED:
        return None
    failed = [f"{i.get('name')}: {i.get('detail')}" for i in result.get("integrity") or []
              if isinstance(i, Mapping) and i.get("verdict") == "fail"]
    return f"{result['status']}: " + ("; ".join(failed) or str(result.get("error") or "no reason recorded"))


def _samples(result: Mapping[str, Any]) -> Optional[np.ndarray]:
    if _failure(result):
        return None  # measured, but not a figure anyone should compare
    values = (result.get("measurement") or {}).get("samples") or []
    try:
        xs = np.array([float(v) for v in values], dtype=np.float64)
    except (TypeError, ValueError):
        return None  # not numbers: treated as unmeasured
    xs = xs[np.isfinite(xs) & (xs > 0)]
    return xs if xs.size else None


def _by_key(doc: Mapping[str, Any]) -> dict[Key, Mapping[str, Any]]:
    """Results by (case key, subject), in document order; a repeated one keeps its last copy."""
    return {(r["case"]["key"], r["subject"]): r for r in doc.get("results", [])}


def _why_not_measured(result: Optional[Mapping[str, Any]], side: str) -> str:
    if result is None:
        return f"not in the {side} results"
    if _failure(result):
        return f"{_failure(result)} in {side}"
    status = result.get("status") or "no samples"
    return f"{status} in {side}" + (f": {result['skipped']}" if result.get("skipped") else "")


def _timing(result: Mapping[str, Any]) -> str:
    m = result.get("measurement") or {}
    return f"{m.get('timing', '?')}/{m.get('cache', '?')}"


def compare_pair(old: Mapping[str, Any], new: Mapping[str, Any], xs_old: np.ndarray, xs_new: np.ndarray,
                 threshold: float) -> Row:
    """Verdict for one subject on one case; both sides have samples."""
    ratio = float(np.median(xs_new) / np.median(xs_old))
    low, high = ratio_interval(xs_old, xs_new)
    few = min(xs_old.size, xs_new.size) < MIN_SAMPLES
    said = "too noisy" if few else verdict(low, high, threshold)
    notes = [f"fewer than {MIN_SAMPLES} samples"] if few else []
    return Row(new["case"]["key"], new["subject"], new.get("role", ""), float(np.median(xs_old)),
               float(np.median(xs_new)), int(xs_old.size), int(xs_new.size), ratio, low, high, said,
               said == "slower" and ratio > 1 + threshold, "; ".join(notes))


def compare_documents(old: Mapping[str, Any], new: Mapping[str, Any], threshold: float = 0.05) -> Comparison:
    """Match results by (case key, subject) and give each pair measured on both sides a verdict."""
    olds, news = _by_key(old), _by_key(new)
    rows: list[Row] = []
    only_old: list[Unmatched] = []
    only_new: list[Unmatched] = []
    unmeasured: list[Unmatched] = []
    failed = [Unmatched(*key, _failure(r)) for key, r in news.items() if _failure(r)]
    for key in dict.fromkeys([*olds, *news]):
        a, b = olds.get(key), news.get(key)
        xa, xb = (_samples(a) if a else None), (_samples(b) if b else None)
        if xa is not None and xb is not None and _timing(a) != _timing(b):
            unmeasured.append(Unmatched(*key, f"not comparable: timed as {_timing(a)} in old, {_timing(b)} in new"))
        elif xa is not None and xb is not None:
            rows.append(compare_pair(a, b, xa, xb, threshold))
        elif xa is not None:
            only_old.append(Unmatched(*key, _why_not_measured(b, "new")))
        elif xb is not None:
            only_new.append(Unmatched(*key, _why_not_measured(a, "old")))
        else:
            unmeasured.append(Unmatched(*key, f"{_why_not_measured(a, 'old')}; {_why_not_measured(b, 'new')}"))
    return Comparison(tuple(rows), tuple(only_old), tuple(only_new), tuple(unmeasured), threshold, tuple(failed))


def _change(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.1f}%"


def verdict_text(row: Row) -> str:
    """e.g. 'slower +12.3% [+10.1%, +14.0%] REGRESSION' or 'same -0.4% [-1.0%, +0.2%]'."""
    text = f"{row.verdict} {_change(row.ratio)} [{_change(row.low)}, {_change(row.high)}]"
    return text + (" REGRESSION" if row.regressed else "")


def describe(items: Iterable[Unmatched]) -> list[str]:
    """Plain lines for results that could not be compared."""
    return [f"{u.key} {u.subject}: {u.reason}" for u in items]
