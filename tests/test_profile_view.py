"""What `cudabench profile` says about its own figure: the profiler's kernel time against events on
the same captured calls, and a note when the capture itself slowed the call."""

from cudabench.profile.view import agreement_line, capture_cost_line


def test_agreement_against_events_on_the_same_calls_less_an_empty_pair():
    summary = {"events_median": 475e-6, "captured_events_median": 562e-6, "events_overhead": 2e-6}
    line = agreement_line("nsys kernel time", 557.2e-6, summary)
    assert "on the same calls" in line and "0.5% apart" in line  # 557.2 against 562 - 2


def test_agreement_falls_back_to_the_events_figure_before_the_capture():
    line = agreement_line("ncu kernel time", 73e-6, {"events_median": 73.0e-6})
    assert "0.0% apart" in line and "same calls" not in line


def test_the_capture_slowing_the_call_is_said_with_both_figures():
    note = capture_cost_line({"events_median": 475e-6, "captured_events_median": 560e-6})
    assert note is not None and "+17.9%" in note and "475" in note and "560" in note
    assert capture_cost_line({"events_median": 475e-6, "captured_events_median": 480e-6}) is None  # 1 %
    assert capture_cost_line({"events_median": 475e-6}) is None  # ncu, torch: no captured events
