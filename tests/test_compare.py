"""`cudabench compare`'s logic on synthetic sample sets: verdicts, regressions and exit codes,
results present on one side only, and threshold parsing."""

import numpy as np
import pytest

from cudabench.results.compare import bootstrap_medians, compare_documents, parse_threshold, verdict, verdict_text
from cudabench.errors import ConfigError
from synthetic import doc, measured, skipped, timex_sweep

SHAPE = {"B": 32, "C": 768, "T": 768}


def one(median, spread=0.01, n=200, seed=0, **kw):
    return doc([measured("timex", SHAPE, "timex-v4", median, spread=spread, n=n, seed=seed, **kw)])


def only_row(old, new, threshold=0.05):
    comparison = compare_documents(old, new, threshold)
    assert len(comparison.rows) == 1
    return comparison, comparison.rows[0]


def test_the_same_file_twice_is_same_everywhere_and_exits_0():
    old = timex_sweep()
    comparison = compare_documents(old, old, 0.05)
    assert len(comparison.rows) == 27 and {r.verdict for r in comparison.rows} == {"same"}
    assert comparison.exit_code == 0 and not comparison.regressions
    assert all(r.ratio == 1.0 and r.low <= 1 <= r.high for r in comparison.rows)


def test_a_rerun_with_fresh_noise_is_same():
    comparison, row = only_row(one(1e-3, seed=1), one(1e-3, seed=2))
    assert row.verdict == "same" and comparison.exit_code == 0


def test_clearly_slower_beyond_the_threshold_is_a_regression_and_exits_1():
    comparison, row = only_row(one(1e-3, seed=1), one(1.2e-3, seed=2))
    assert row.verdict == "slower" and row.regressed and row.ratio == pytest.approx(1.2, rel=0.01)
    assert 1.05 < row.low < row.ratio < row.high
    assert comparison.exit_code == 1 and comparison.regressions == (row,)
    assert verdict_text(row).startswith("slower +20") and verdict_text(row).endswith("REGRESSION")


def test_slower_within_the_threshold_is_not_a_regression():
    comparison, row = only_row(one(1e-3, seed=1), one(1.08e-3, seed=2), threshold=0.10)
    assert row.verdict == "same" and not row.regressed and comparison.exit_code == 0
    comparison, row = only_row(one(1e-3, seed=1), one(1.08e-3, seed=2), threshold=0.05)
    assert row.verdict == "slower" and row.regressed and comparison.exit_code == 1


def test_faster():
    comparison, row = only_row(one(1e-3, seed=1), one(0.7e-3, seed=2))
    assert row.verdict == "faster" and not row.regressed and comparison.exit_code == 0
    assert row.high < 1 and verdict_text(row).startswith("faster -30")


def test_too_noisy_to_say():
    comparison, row = only_row(one(1e-3, spread=0.4, n=12, seed=1), one(1.1e-3, spread=0.4, n=12, seed=2))
    assert row.verdict == "too noisy" and not row.regressed and comparison.exit_code == 0
    assert row.low < 1 < row.high


def test_too_few_samples_are_too_noisy_with_a_note():
    _, row = only_row(one(1e-3, n=2), one(2e-3, n=2))
    assert row.verdict == "too noisy" and "fewer than" in row.note


def test_differently_timed_results_are_not_compared_nor_gated():
    comparison = compare_documents(one(1e-3), one(2e-3, timing="events"), 0.05)
    assert not comparison.rows and comparison.exit_code == 0
    assert "not comparable: timed as sync/hot in old, events/hot in new" in comparison.unmeasured[0].reason


def test_results_on_one_side_are_listed_not_dropped():
    a = measured("timex", SHAPE, "timex-v4", 1e-3)
    b = measured("timex", SHAPE, "timex-v3", 1e-3)
    c = measured("timex", SHAPE, "conv1d", 1e-3, role="baseline")
    old = doc([a, b, skipped("timex", {"T": 66}, "timex-v3"), c])
    new = doc([a, skipped("timex", SHAPE, "timex-v3", "build failed: boom"),
               skipped("timex", {"T": 66}, "timex-v3"), measured("timex", {"T": 512}, "timex-v4", 1e-3)])
    comparison = compare_documents(old, new, 0.05)
    assert [(r.subject, r.verdict) for r in comparison.rows] == [("timex-v4", "same")]
    assert [(u.subject, u.reason) for u in comparison.only_old] == [
        ("timex-v3", "SKIP in new: build failed: boom"), ("conv1d", "not in the new results")]
    assert [(u.key, u.reason) for u in comparison.only_new] == [("timex[T=512]/fwd", "not in the old results")]
    assert [u.key for u in comparison.unmeasured] == ["timex[T=66]/fwd"]
    assert comparison.exit_code == 0


def test_verdicts_are_deterministic():
    old, new = one(1e-3, spread=0.05, n=30, seed=1), one(1.03e-3, spread=0.05, n=30, seed=2)
    assert compare_documents(old, new).rows == compare_documents(old, new).rows


@pytest.mark.parametrize("low, high, said", [
    (0.99, 1.01, "same"), (1.01, 1.04, "same"), (1.06, 1.10, "slower"), (1.01, 1.06, "slower"),
    (0.80, 0.90, "faster"), (0.90, 1.10, "too noisy"), (1 / 1.05, 1.05, "same"),
])
def test_verdict_rule(low, high, said):
    assert verdict(low, high, 0.05) == said


def test_fast_bootstrap_medians_match_brute_force():
    xs = np.arange(1.0, 7.0)
    fast = bootstrap_medians(xs, np.random.default_rng(0), 100_000)
    brute = np.median(xs[np.random.default_rng(1).integers(0, 6, (100_000, 6))], axis=1)
    for value in np.unique(brute):
        assert np.mean(fast == value) == pytest.approx(np.mean(brute == value), abs=0.006)


@pytest.mark.parametrize("text, value", [("5%", 0.05), ("0.05", 0.05), ("12.5%", 0.125), ("0", 0.0),
                                         (" 150% ", 1.5)])
def test_threshold_parsing(text, value):
    assert parse_threshold(text) == pytest.approx(value)


@pytest.mark.parametrize("text, fragment", [("-5%", "non-negative"), ("5", "ambiguous"), ("abc", "Cannot use"),
                                            ("nan", "Cannot use"), ("", "Cannot use")])
def test_bad_thresholds(text, fragment):
    with pytest.raises(ConfigError, match=fragment):
        parse_threshold(text)


def test_non_numeric_samples_are_unmeasured_not_a_crash():
    bad = one(1e-3)
    bad["results"][0]["measurement"]["samples"] = ["fast", "slow"]
    comparison = compare_documents(bad, one(1e-3), 0.05)
    assert not comparison.rows and comparison.only_new


def test_an_invalid_or_crashed_result_in_new_fails_the_gate_and_is_never_compared():
    from dataclasses import replace

    from cudabench.results.model import IntegrityCheck

    shape = {"B": 32, "C": 768, "T": 768}
    old = doc([measured("timex", shape, "timex-v4", 1e-3), measured("timex", shape, "conv1d", 4e-3, role="baseline")])
    cheat = replace(measured("timex", shape, "timex-v4", 1e-6),
                    integrity=(IntegrityCheck("stale-output", "fail", "error 1.1"),))
    crashed = replace(skipped("timex", shape, "conv1d"), skipped="", role="baseline",
                      error="CUDA error: an illegal memory access was encountered")
    comparison = compare_documents(old, doc([cheat, crashed]), 0.05)
    assert comparison.rows == () and comparison.exit_code == 1
    reasons = {u.subject: u.reason for u in comparison.failed}
    assert reasons["timex-v4"] == "INVALID: stale-output: error 1.1"
    assert reasons["conv1d"].startswith("ERROR: CUDA error")
