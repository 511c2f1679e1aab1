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
