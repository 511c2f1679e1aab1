"""The tutorial's synchronize placements against a simulated GPU queue (deterministic)."""

import pytest

from cudabench.measure.sync_modes import PLACEMENTS, ModeResult, time_placement

LAUNCH, KERNEL, SYNC = 5.0, 100.0, 2.0  # µs


class FakeGpu:
    """A host clock and a launch queue: a call costs LAUNCH on the host and queues KERNEL of work
    after whatever is queued; synchronize waits for the queue to drain (plus SYNC)."""

    def __init__(self):
        self.now = 0.0
        self.queue_end = 0.0

    def call(self):
        self.now += LAUNCH
        self.queue_end = max(self.queue_end, self.now) + KERNEL

    def busy(self, us=1000.0):
        self.queue_end = max(self.queue_end, self.now) + us

    def sync(self):
        self.now = max(self.now, self.queue_end) + SYNC

    def clock(self):
        return self.now


def placement(name):
    return next(p for p in PLACEMENTS if p.name == name)


def measure(name, warmup=10, busy=True):
    gpu = FakeGpu()
    return time_placement(gpu.call, placement(name), 5, warmup, gpu.sync, gpu.clock, gpu.busy if busy else None)


def test_both_measures_launch_plus_kernel_plus_sync():
    assert measure("both") == [LAUNCH + KERNEL + SYNC] * 5


def test_before_only_and_none_measure_the_launch_call():
    assert measure("before") == [LAUNCH] * 5
    assert measure("none") == [LAUNCH] * 5


def test_after_only_pays_for_the_queue_on_its_first_iteration():
    times = measure("after")
    queued = 1000.0 + 10 * KERNEL  # the earlier work and the warm-up calls still queued
    assert times[0] == pytest.approx(queued - 10 * LAUNCH + KERNEL + SYNC)
    assert times[1:] == [LAUNCH + KERNEL + SYNC] * 4


def test_only_both_is_marked_valid():
    assert [p.name for p in PLACEMENTS if p.valid] == ["both"]


def test_mode_result_separates_the_first_iteration():
    r = ModeResult("x", (9.0, 1.0, 2.0, 3.0), True, "")
    assert r.first == 9.0 and r.rest_median == 2.0


def test_timeline_spans_sort_api_calls_marks_and_kernels_into_their_modes(tmp_path):
    """Activities as CUPTI records them (API calls on the host, kernels and annotation shadows on
    the GPU, other host events) and the clock's marks, all in µs on one clock."""
    from cudabench.measure.sync_modes import timeline_spans
    from cudabench.measure.cupti_activity import Activity

    events = [Activity("void sleep_kernel", True, 101.0, 120.0), Activity("cudaDeviceSynchronize", False, 121.0, 125.0),
              Activity("cudaLaunchKernel", False, 125.5, 127.0), Activity("add2_kernel", True, 128.0, 138.0),
              Activity("range", True, 128.0, 138.0, annotation=True), Activity("cudaGetDevice", False, 126.0, 126.1),
              Activity("cudaLaunchKernel", False, 301.0, 303.0), Activity("add2_kernel", True, 304.0, 314.0),
              Activity("add2_kernel", True, 900.0, 910.0)]  # outside every mode: dropped
    modes = [("both", 100.0, 200.0), ("none", 300.0, 350.0)]
    marks = [("both", "warm-up", 102.0, 104.0), ("both", "clock", 125.0, 140.0), ("none", "clock", 300.5, 303.5)]
    spans = timeline_spans(events, modes, marks)
    both = [(s["lane"], s["kind"], s["start"], s["end"]) for s in spans if s["mode"] == "both"]
    assert both == [("gpu", "busy", 1.0, 20.0), ("host", "warm-up", 2.0, 4.0), ("host", "synchronize", 21.0, 25.0),
                    ("host", "clock", 25.0, 40.0), ("host", "launch", 25.5, 27.0), ("gpu", "kernel", 28.0, 38.0)]
    none = [(s["lane"], s["kind"], s["start"]) for s in spans if s["mode"] == "none"]
    assert none == [("host", "clock", 0.5), ("host", "launch", 1.0), ("gpu", "kernel", 4.0)]
    assert [s["mode"] for s in spans] == ["both"] * 6 + ["none"] * 3

    pytest.importorskip("matplotlib")
    from cudabench.results.plots.timeline import plot_timeline

    path = plot_timeline(spans, {"both": ("sync both: 15 µs", True), "none": ("sync none: 2 µs", False)}, "add2", tmp_path / "t.png")
    assert path.read_bytes()[:4] == b"\x89PNG"
