"""Parsing a real nsys SQLite export (tests/fixtures/README.md says how it was made)."""

from pathlib import Path

import pytest

from cudabench.profile.nsys_report import (call_timeline, gpu_time_in, kernel_table, launch_overhead, range_table, read_report,
                                   short_kernel_name)

FIXTURE = Path(__file__).parent / "fixtures" / "nsys-timex-v4-fwdbwd.sqlite"


@pytest.fixture(scope="module")
def report():
    return read_report(FIXTURE)


def test_kernels_with_names_from_string_ids(report):
    table = {t.name: t for t in kernel_table(report)}
    assert set(table) == {"fwd_vec<8>", "bwd_vec<2>", "sum_partials"}
    assert all(t.count == 3 for t in table.values())
    assert all(0 < t.min <= t.median <= t.max < 1e-3 for t in table.values())
    assert table["fwd_vec<8>"].total == pytest.approx(sum(k.duration for k in report.kernels
                                                          if k.name == "fwd_vec<8>") / 1e9)


def test_nvtx_ranges_with_registered_strings_and_domain(report):
    ranges = {r.name: r for r in range_table(report)}
    assert set(ranges) == {"timed timex-v4", "timex-v4 call"}
    assert ranges["timex-v4 call"].count == 3 and ranges["timed timex-v4"].count == 1
    assert {r.domain for r in ranges.values()} == {"cudabench"}


def test_gpu_time_of_a_range_is_the_kernels_it_launched(report):
    ranges = {r.name: r for r in range_table(report)}
    all_kernels = sum(k.duration for k in report.kernels) / 1e9
    assert ranges["timed timex-v4"].gpu_total == pytest.approx(all_kernels)
    assert ranges["timex-v4 call"].gpu_total == pytest.approx(all_kernels)
    call = next(r for r in report.ranges if r.text == "timex-v4 call")
    first_three = sum(k.duration for k in report.kernels[:3])  # fwd, bwd, sum of the first call
    assert gpu_time_in(report, call.start, call.end) == first_three


def test_launch_overhead(report):
    launch = launch_overhead(report)
    assert launch.launches == 9 and launch.api_total > 0
    assert launch.latency_median is not None and launch.latency_median > 0
    assert launch.kernel_total == pytest.approx(sum(k.duration for k in report.kernels) / 1e9)


@pytest.mark.parametrize("demangled, short", [
    ("void <unnamed>::fwd_vec<(int)8>(const float *, const float *, float *, float, int, int)", "fwd_vec<8>"),
    ("<unnamed>::sum_partials(const float *, float *, int, unsigned long)", "sum_partials"),
    ("(anonymous namespace)::add2_kernel(float const*, float const*, float*, long long)", "add2_kernel"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>(int, T2, T3)",
     "at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>"),
])
def test_short_kernel_names(demangled, short):
    assert short_kernel_name(demangled) == short


def test_call_timeline_draws_the_first_calls_with_their_launches_syncs_and_kernels(report, tmp_path):
    spans = call_timeline(report, " call", 2)
    clocks = [s for s in spans if s["kind"] == "clock"]
    assert len(clocks) == 2 and clocks[0]["start"] == 0.0
    for clock in clocks:  # each call: its three launches, its kernels and its synchronize inside the range
        inside = [s for s in spans if clock["start"] <= s["start"] <= clock["end"]]
        kinds = [s["kind"] for s in inside if s is not clock]
        assert kinds.count("launch") == 3 and kinds.count("kernel") == 3 and "synchronize" in kinds, kinds
    first_kernels = [s for s in spans if s["kind"] == "kernel"][:3]
    assert [round(s["end"] - s["start"], 3) for s in first_kernels] == [k.duration / 1e3 for k in report.kernels[:3]]
    assert call_timeline(report, " no such range", 2) == []

    pytest.importorskip("matplotlib")
    from cudabench.results.plots.timeline import plot_timeline

    path = plot_timeline(spans, {"profiled": ("timex-v4", True)}, "nsys", tmp_path / "t.png")
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_the_workers_sleeps_between_calls_leave_the_tables(report):
    """The GPU sleeps queued before each profiled call (outside its range) are cudabench's: no row,
    no launch, no GPU time of any range."""
    from dataclasses import replace

    from cudabench.profile.nsys_report import SLEEP_KERNEL, ApiCall, Kernel, without_sleeps

    first = report.kernels[0]
    sleep = Kernel(SLEEP_KERNEL, first.start - 5000, first.start - 100, 999_999)
    launch = ApiCall("cudaLaunchKernel", first.start - 9000, first.start - 8000, 999_999, report.api_calls[0].thread)
    with_sleep = replace(report, kernels=(sleep, *report.kernels), api_calls=(launch, *report.api_calls))
    assert SLEEP_KERNEL in {t.name for t in kernel_table(with_sleep)}  # the test's premise
    cleaned = without_sleeps(with_sleep)
    assert cleaned == report
    assert launch_overhead(cleaned).launches == 9
