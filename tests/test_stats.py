import statistics

import pytest

from cudabench.results.stats import relative_noise, speedup, summarize, throughput


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
