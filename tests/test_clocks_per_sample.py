"""Clocks per sample (issue 32, part 3) on the CPU: each batch of samples takes the NVML poll reading
nearest its end; samples taken while a power, thermal or hardware slowdown reason was set are left
out of the figures and kept in the results file; `--wide` shows the clock ratio, the notes say how
many were left out, and compare says when two runs' clocks differ enough to explain a verdict."""

import json
import time
from dataclasses import replace

import numpy as np

from cudabench.device import ClockReading
from cudabench.measure.clocks import THROTTLE_MASK, ClockMonitor, split_throttled
from cudabench.measure.loop import Warmup, measure
from cudabench.measure.stop import FixedCount
from cudabench.results.compare.verdicts import compare_documents
from cudabench.results.exporters.json_document import check_document, json_safe, result_from_dict, result_to_dict
from cudabench.results.records.model import Measurement
from cudabench.results.records.stats import summarize
from cudabench.results.report import terminal
from synthetic import doc, measured

POWER_CAP = 0x4


def reading(sm, reasons=0):
    return ClockReading(sm_mhz=sm, mem_mhz=2600, sm_max_mhz=1980, temperature_c=60, power_w=500, reasons=reasons)


def test_samples_of_a_throttled_batch_are_left_out():
    samples = [1.0, 1.0, 1.0, 1.3, 1.3, 1.0]
    batches = [(0, 2, 10.0), (2, 2, 20.0), (4, 2, 30.0)]
    readings = [(9.9, reading(1980)), (20.2, reading(1600, POWER_CAP)), (29.0, reading(1980, 0x1))]  # 0x1: idle
    kept, left_out, clocks = split_throttled(samples, batches, readings)
    assert kept == (1.0, 1.0, 1.3, 1.0) and left_out == (1.0, 1.3)
    assert [(c.first, c.count, c.sm_mhz, c.throttled) for c in clocks] == [(0, 2, 1980, False), (2, 2, 1600, True),
                                                                          (4, 2, 1980, False)]


def test_when_every_sample_was_throttled_all_are_kept_and_the_clocks_say_so():
    kept, left_out, clocks = split_throttled([1.0, 2.0], [(0, 2, 1.0)], [(1.0, reading(1500, THROTTLE_MASK))])
    assert kept == (1.0, 2.0) and left_out == () and clocks[0].throttled


def test_no_readings_keep_every_sample():
    assert split_throttled([1.0], [(0, 1, 1.0)], []) == ((1.0,), (), ())


def test_measure_marks_each_batch_and_the_monitor_applies_the_readings():
    class TwoPerBatch:
        name, batch = "sync", 2

        def prepare(self, call, estimate):
            pass

        def samples(self, call, count, before_each=None):
            return [1e-3] * count

    monitor = ClockMonitor()
    m = measure(lambda: None, TwoPerBatch(), FixedCount(6), Warmup(calls=1, seconds=0.0), lambda: None,
                on_batch=monitor.mark)
    assert [(first, count) for first, count, _ in monitor.batches] == [(0, 2), (2, 2), (4, 2)]
    ends = [end for _, _, end in monitor.batches]
    monitor.times, monitor.during = ends, [reading(1980), reading(1500, POWER_CAP), reading(1980)]
    applied = monitor.applied(m)
    assert len(applied.samples) == 4 and len(applied.throttled_samples) == 2
    assert [c.throttled for c in applied.sample_clocks] == [False, True, False]


def with_clocks(result, sm, throttled=()):
    m = replace(result.measurement, clocks=(("during_sm_mhz_median", sm), ("before_sm_max_mhz", 1980.0)),
                throttled_samples=tuple(throttled))
    return replace(result, measurement=m)


def test_the_results_file_keeps_the_left_out_samples_and_the_clocks():
    r = with_clocks(measured("timex", {"B": 1, "C": 1, "T": 8}, "timex-v4", 1e-3), 1755.0, [2e-3, 2e-3])
    m = replace(r.measurement, sample_clocks=split_throttled([1.0, 1.0], [(0, 2, 1.0)],
                                                              [(1.0, reading(1600, POWER_CAP))])[2])
    r = replace(r, measurement=m)
    text = json.dumps(json_safe(doc([r])))
    loaded = check_document(json.loads(text), "file")
    again = result_from_dict(loaded["results"][0])
    assert again.measurement.throttled_samples == (2e-3, 2e-3) and again.measurement.sample_clocks == m.sample_clocks
    older = result_to_dict(r)
    del older["measurement"]["sample_clocks"], older["measurement"]["throttled_samples"]
    assert result_from_dict(older).measurement.throttled_samples == ()  # a file from before reads


def test_wide_shows_the_clock_ratio_and_the_notes_say_how_many_were_left_out():
    from rich.console import Console

    r = with_clocks(measured("timex", {"B": 1, "C": 1, "T": 8}, "timex-v4", 1e-3), 1782.0, [2e-3] * 3)
    console = Console(width=200, record=True)
    for table in terminal.tables([r], wide=True):
        console.print(table)
    text = console.export_text()
    assert "SM clock" in text and "90%" in text
    assert any("3 of 203 samples left out: taken while the GPU was throttled" in line for line in terminal.notes([r]))


def test_compare_says_when_the_clocks_differ_enough_to_explain_a_verdict():
    shape = {"B": 1, "C": 1, "T": 8}
    old = with_clocks(measured("timex", shape, "timex-v4", 1.00e-3, seed=1), 1980.0)
    new = with_clocks(measured("timex", shape, "timex-v4", 1.12e-3, seed=2), 1755.0)
    normal = lambda r: check_document(json.loads(json.dumps(json_safe(doc([r])))), "f")  # noqa: E731
    [row] = compare_documents(normal(old), normal(new), 0.05).rows
    assert row.verdict == "slower" and "SM clock 1980 -> 1755 MHz (-11.4%), which may explain it" in row.note
    same_clock = with_clocks(measured("timex", shape, "timex-v4", 1.12e-3, seed=2), 1975.0)
    [row] = compare_documents(normal(old), normal(same_clock), 0.05).rows
    assert "SM clock" not in row.note


def test_figures_come_from_the_kept_samples_only():
    m = Measurement(samples=(1e-3,) * 10, timing="sync", warmup_calls=1, warmup_seconds=0.0, stop_reason="x",
                    throttled_samples=(9e-3,) * 5)
    assert summarize(m.samples).median == 1e-3 and np.isclose(max(m.samples), 1e-3)


def test_a_subject_that_fakes_throttle_reasons_is_caught_by_the_state_guard():
    """Faking NVML's clock event reasons would leave its slow samples out as throttled: NVML's
    functions are compared by identity after each subject, restored, and named."""
    import pytest

    pynvml = pytest.importorskip("pynvml")
    from cudabench.measure.state import StateGuard

    guard = StateGuard(cuda=False)
    real = pynvml.nvmlDeviceGetCurrentClocksEventReasons
    pynvml.nvmlDeviceGetCurrentClocksEventReasons = lambda handle: THROTTLE_MASK
    left = guard.restore()
    assert "pynvml.nvmlDeviceGetCurrentClocksEventReasons" in left.patched
    assert pynvml.nvmlDeviceGetCurrentClocksEventReasons is real


def test_nvml_loading_its_library_during_a_subject_is_not_taken_for_a_patch(monkeypatch):
    """pynvml sets its module global `nvmlLib` on the first nvmlInit, which may come during the first
    subject's timing: the guard loads NVML before its snapshot, so no honest subject is blamed."""
    import pytest

    pynvml = pytest.importorskip("pynvml")
    from cudabench.measure.state import StateGuard

    monkeypatch.setattr(pynvml, "nvmlLib", None)
    loaded = object()
    monkeypatch.setattr(pynvml, "nvmlInit", lambda: setattr(pynvml, "nvmlLib", pynvml.nvmlLib or loaded))
    guard = StateGuard(cuda=False)
    pynvml.nvmlInit()  # what the clock monitor does during the subject
    assert not guard.restore().patched
    assert pynvml.nvmlLib is loaded


def test_the_notes_name_the_reasons_and_say_when_every_sample_was_throttled():
    """Seen on the H100 beside a process running matmuls: every batch under the SW power cap, so
    nothing was left out; the note must say the figure is slow, and why."""
    base = measured("timex", {"B": 1, "C": 1, "T": 8}, "timex-v4", 1e-3)
    all_capped = split_throttled([1.0] * 4, [(0, 2, 1.0), (2, 2, 2.0)],
                                 [(1.0, reading(1600, POWER_CAP)), (2.0, reading(1590, POWER_CAP))])
    r = replace(base, measurement=replace(base.measurement, samples=all_capped[0], sample_clocks=all_capped[2]))
    [note] = [line for line in terminal.notes([r]) if "throttled" in line]
    assert "all 4 samples were taken while the GPU was throttled (SW power cap)" in note
    assert "slower than the GPU can do" in note
    half = split_throttled([1.0] * 4, [(0, 2, 1.0), (2, 2, 2.0)],
                           [(1.0, reading(1980)), (2.0, reading(1500, POWER_CAP | 0x20))])
    r = replace(base, measurement=replace(base.measurement, samples=half[0], throttled_samples=half[1],
                                          sample_clocks=half[2]))
    [note] = [line for line in terminal.notes([r]) if "throttled" in line]
    assert "2 of 4 samples left out: taken while the GPU was throttled (SW power cap, SW thermal slowdown)" in note
    plain = replace(base, measurement=replace(base.measurement, sample_clocks=half[2][:1]))
    assert not [line for line in terminal.notes([plain]) if "throttled" in line]


def test_batches_under_one_reading_are_one_run_so_a_thousand_single_samples_make_a_few_records():
    """A timer of one call per batch takes a batch per sample; the poll reads the clocks every 50 ms.
    Consecutive batches that took the same reading are one record, with the same samples kept or left out
    as one record per batch would give."""
    samples = [1.0] * 1000
    batches = [(i, 1, (i + 0.5) * 1e-4) for i in range(1000)]             # 0.1 s of samples
    readings = [(0.0, reading(1980)), (0.05, reading(1600, POWER_CAP)), (0.1, reading(1980))]
    kept, left_out, clocks = split_throttled(samples, batches, readings)
    assert [(c.first, c.count, c.sm_mhz, c.throttled) for c in clocks] == [
        (0, 250, 1980, False), (250, 500, 1600, True), (750, 250, 1980, False)]
    assert len(kept) == 500 and len(left_out) == 500


def test_the_monitor_finds_the_device_once_before_the_block(monkeypatch):
    """The device is found before the block (its maximum clock asked once, 1.4 ms on the H200) and not
    beside the block's first calls, whose time estimates the call; every reading uses it."""
    from cudabench.measure import clocks

    found, used = [], []
    monkeypatch.setattr(clocks, "nvml_device", lambda: found.append(1) or ("nvml", "handle"))
    monkeypatch.setattr(clocks, "read_clocks", lambda device=None: used.append(device) or reading(1980))
    monitor = ClockMonitor(interval=0.001)
    with monitor:
        assert found == [1] and monitor.before == reading(1980)
        waited = 0
        while not monitor.during and waited < 10_000:  # the thread's first poll (at most 10 s)
            time.sleep(0.001)
            waited += 1
    assert monitor.during and found == [1] and monitor.after == reading(1980)
    assert set(used) == {("nvml", "handle")}


def test_a_monitor_without_nvml_reads_nothing(monkeypatch):
    from cudabench.measure import clocks

    monkeypatch.setattr(clocks, "nvml_device", lambda: None)
    with ClockMonitor() as monitor:
        pass
    assert monitor.before is None and monitor.after is None and monitor.during == []


def test_the_timers_preparation_counts_as_warm_up_not_as_sampling():
    """A graph's capture is untimed work before the first sample: measure's warm-up seconds hold it,
    so the worker's sampling phase (the block's time less the warm-up) is the samples alone."""
    import time

    class SlowToPrepare:
        name, batch = "graph", 1

        def prepare(self, call, estimate):
            time.sleep(0.05)

        def samples(self, call, count, before_each=None):
            return [1e-3] * count

    m = measure(lambda: None, SlowToPrepare(), FixedCount(3), Warmup(calls=1, seconds=0.0), lambda: None)
    assert m.warmup_seconds >= 0.05


def test_a_reading_asks_nvml_only_what_changes():
    """The maximum SM clock is asked once, when the device is found (1.4 ms a query on the H200, where
    the other readings take microseconds), not at every reading of a poll."""
    from cudabench.device import NvmlDevice, read_clocks

    class FakeNvml:
        NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 0, 1, 0

        def nvmlDeviceGetClockInfo(self, h, which):
            return 1755 if which == self.NVML_CLOCK_SM else 2619

        def nvmlDeviceGetMaxClockInfo(self, h, which):
            raise AssertionError("asked again")

        def nvmlDeviceGetTemperature(self, h, which):
            return 41

        def nvmlDeviceGetPowerUsage(self, h):
            return 123_000

        def nvmlDeviceGetCurrentClocksEventReasons(self, h):
            return 0x4

    got = read_clocks(device=NvmlDevice(FakeNvml(), "handle", 1980))
    assert got == ClockReading(sm_mhz=1755, mem_mhz=2619, sm_max_mhz=1980, temperature_c=41, power_w=123.0, reasons=4)
