import statistics

import pytest

from cudabench.results.records.stats import relative_noise, speedup, summarize, throughput


def test_summary_matches_the_statistics_module():
    xs = [5.0, 1.0, 4.0, 2.0, 3.0, 10.0, 2.5]
    s = summarize(xs)
    q1, med, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    assert (s.n, s.min, s.max) == (7, 1.0, 10.0)
    assert s.median == pytest.approx(med) and s.q1 == pytest.approx(q1) and s.q3 == pytest.approx(q3)
    assert s.mean == pytest.approx(statistics.fmean(xs)) and s.stdev == pytest.approx(statistics.stdev(xs))
    assert s.iqr == pytest.approx(q3 - q1) and s.noise == pytest.approx((q3 - q1) / med)


def test_single_sample_has_no_spread():
    s = summarize([2e-6])
    assert s.median == s.min == s.max == 2e-6 and s.stdev == 0 and s.noise == 0


def test_empty_samples_are_an_error():
    with pytest.raises(ValueError):
        summarize([])


def test_noise_is_robust_to_one_outlier():
    assert relative_noise([1.0] * 20 + [100.0]) == 0


def test_speedup_and_throughput():
    assert speedup(4.5e-3, 4.5e-4) == pytest.approx(10)
    assert throughput(14.5e9, 0.5e-3) == pytest.approx(29e12)
    assert throughput(0, 1.0) == 0


# ---- the median's confidence interval and the stop rule that targets it ----------------------------

def test_median_interval_covers_the_true_median_about_95_percent_of_the_time():
    import numpy as np

    from cudabench.results.records.stats import median_interval

    rng = np.random.default_rng(7)
    true_median = np.log(2)  # of the exponential distribution with mean 1: skewed, like timings
    hits = sum(low <= true_median <= high
               for low, high in (median_interval(rng.exponential(size=101)) for _ in range(1000)))
    assert 0.93 <= hits / 1000 <= 0.98


def test_median_interval_narrows_with_more_samples_and_is_the_range_for_few():
    import numpy as np

    from cudabench.results.records.stats import median_interval

    rng = np.random.default_rng(1)
    xs = 1e-3 * (1 + 0.05 * rng.standard_normal(10_000))
    small, large = summarize(xs[:100]), summarize(xs)
    assert small.ci_low <= small.median <= small.ci_high
    assert large.precision < small.precision / 5  # about 1/sqrt(100) of it
    assert median_interval([3.0, 1.0, 2.0]) == (1.0, 3.0)


def test_adaptive_rule_stops_on_the_median_precision_not_the_spread_of_calls():
    """Calls that vary ±10 % never get an IQR/median under 0.5 %, yet their median is known to
    ±0.5 % after a few thousand samples: the rule stops there, long before its time limit."""
    import numpy as np

    from cudabench.measure.stop import Adaptive

    rng = np.random.default_rng(3)
    xs = list(1e-3 * (1 + 0.1 * rng.standard_normal(20_000)))
    rule = Adaptive(target=0.005, max_time=1e9)
    stopped = next(n for n in range(10, len(xs)) if rule.decide(xs[:n], elapsed=1.0))
    assert stopped < 5_000 and summarize(xs[:stopped]).noise > 0.1
    assert "median ±" in rule.decide(xs[:stopped], 1.0) and "<= target ±0.50%" in rule.decide(xs[:stopped], 1.0)
    timed_out = Adaptive(target=0.0001, max_time=1.0).decide(xs[:200], elapsed=2.0)
    assert timed_out.startswith("time limit 1 s reached") and "> target" in timed_out
