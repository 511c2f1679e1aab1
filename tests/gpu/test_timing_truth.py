"""The timers against each other and against an independent CUPTI reading (issue: timing truth).
These compare two measurements of the same work, never a wall-clock threshold."""

import statistics

import pytest
import torch
from typer.testing import CliRunner

from cudabench.cli.app import app
from cudabench.measure.loop import Warmup, measure
from cudabench.measure.stop import FixedCount
from cudabench.engine.plan import RunOptions, plan
from cudabench.measure.subject import Bench
from runs import run_in_workers
from cudabench.measure.timers import CuptiTimer, EventTimer, GraphTimer, SyncTimer

pytestmark = pytest.mark.gpu


def _call(registry, name, shape, direction="fwd"):
    task = plan(registry, [name], shape, RunOptions(directions=(direction,), baselines=()))[0]
    call, check = Bench(registry).checked_call(task.family, task.cases[0], name, "variant", seed=7)
    assert check.passed
    return call


def _median(call, timer, n=200):
    return statistics.median(measure(call, timer, FixedCount(n), Warmup(10, 0.05), torch.cuda.synchronize).samples)


def independent_kernel_time(call, calls=200):
    """A separate torch.profiler session: total CUDA kernel time / number of calls."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    for _ in range(10):
        call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == DeviceType.CUDA]
    return sum(e.time_range.elapsed_us() for e in kernels) / 1e6 / calls


def test_add2_cupti_mode_matches_independent_profile_and_graph_is_close(registry):
    call = _call(registry, "add2", {"n": 2**20})
    cupti = _median(call, CuptiTimer())
    independent = independent_kernel_time(call)
    graph = _median(call, GraphTimer(), n=50)
    assert abs(cupti / independent - 1) < 0.05, (cupti, independent)
    assert abs(graph / independent - 1) < 0.40, (graph, independent)


def test_timex_v4_sync_and_events_agree_with_cupti(registry):
    call = _call(registry, "timex-v4", {})
    cupti = _median(call, CuptiTimer(), n=100)
    events = _median(call, EventTimer(), n=100)
    sync = _median(call, SyncTimer(), n=100)
    assert abs(events / cupti - 1) < 0.02, (events, cupti)
    # wall time per call = GPU time + launch and synchronize round trip, never less than the kernels
    assert sync > cupti * 0.99 and sync - events < 60e-6, (sync, events, cupti)


def test_short_kernel_reports_kernel_time_apart_from_launch(registry):
    options = RunOptions(rule=FixedCount(50), warmup=Warmup(5, 0), baselines=())
    results = run_in_workers(options, plan(registry, ["add2"], {"n": 2**16}, options))
    extra = dict(results[0].measurement.extra)
    assert extra["kernel_time_cupti"] < results[0].stats.median
    assert extra["launch_and_sync_overhead"] > 0


@pytest.mark.parametrize("timing", ["sync", "events", "graph", "cupti"])
def test_every_timing_mode_runs_hot_and_cold(registry, timing):
    for cold in (False, True):
        options = RunOptions(rule=FixedCount(20), warmup=Warmup(3, 0), timing=timing, cold=cold,
                             directions=("fwd", "bwd", "fwdbwd"), fuzz=0)
        results = run_in_workers(options, plan(registry, ["timex-v4"], {"B": 8, "C": 64, "T": 256}, options))
        assert {r.case.direction for r in results} == {"fwd", "bwd", "fwdbwd"}
        for r in results:
            assert r.status == "ok", (r.subject, r.case.direction, r.skipped, r.error)
            assert r.measurement.timing == timing and r.measurement.cache == ("cold" if cold else "hot")
            assert r.stats.n == 20 and r.stats.median > 0


@pytest.mark.parametrize("kernel, shape, dtype", [
    ("attn-flash2", {"B": 1, "H": 2, "N": 256, "D": 64, "causal": 1}, "bfloat16"),  # saves O, log-sum-exp
    ("timex-fft", {"B": 2, "C": 8, "T": 2048}, "float32"),                        # saves spectra beyond 1024
])
def test_a_backward_under_graph_timing_is_judged_on_a_forward_of_its_own_values(registry, kernel, shape, dtype):
    """A graph of the backward alone replays it on the forward it was captured with: on the judge's new
    values an honest kernel's gradients would be wrong (tests/test_graph_backward.py on the CPU)."""
    options = RunOptions(rule=FixedCount(20), warmup=Warmup(3, 0), timing="graph", directions=("bwd",),
                         dtypes=(dtype,), fuzz=0)
    results = run_in_workers(options, plan(registry, [kernel], shape, options))
    assert len(results) >= 2  # the variant and a baseline
    for r in results:
        assert r.status == "ok", (r.subject, r.skipped, [c for c in r.integrity if c.failed])
        fresh = next(c for c in r.integrity if c.name == "fresh-output")
        assert fresh.verdict == "pass" and r.measurement.timing == "graph", fresh


def test_clock_readings_recorded(registry):
    options = RunOptions(rule=FixedCount(30), warmup=Warmup(3, 0.2), baselines=(), directions=("fwd",))
    results = run_in_workers(options, plan(registry, ["timex-v4"], {}, options))
    clocks = dict(results[0].measurement.clocks)
    assert clocks["before_sm_max_mhz"] > 0 and clocks["after_sm_mhz"] > 0


def test_compare_sync_modes_prints_table_view_and_explanation():
    res = CliRunner().invoke(app, ["compare-sync-modes", "--iters", "30"])
    assert res.exit_code == 0, res.output
    for text in ["sync both", "sync before", "sync after", "sync none", "events", "graph", "cupti",
                 "first 10 iterations", "How to read this"]:
        assert text in res.output


def test_compare_sync_modes_draws_the_timeline(tmp_path, monkeypatch):
    """--timeline: every mode has its launches on the host and its kernels on the GPU, and "both"
    has a synchronize before each clock span; the picture is written."""
    pytest.importorskip("matplotlib")
    from cudabench.results.plots import timeline

    drawn = {}
    real = timeline.plot_timeline

    def keep(spans, headings, title, out_path, x_label):
        drawn.update(spans=spans, headings=headings)
        return real(spans, headings, title, out_path, x_label)

    monkeypatch.setattr(timeline, "plot_timeline", keep)
    path = tmp_path / "sync.png"
    res = CliRunner().invoke(app, ["compare-sync-modes", "-k", "add2", "--iters", "10", "--timeline", str(path)])
    assert res.exit_code == 0, res.output
    assert path.read_bytes()[:4] == b"\x89PNG" and f"wrote {path}" in res.output
    spans = drawn["spans"]
    for mode in ("both", "before", "after", "none"):
        kinds = {(s["lane"], s["kind"]) for s in spans if s["mode"] == mode}
        assert {("host", "launch"), ("host", "clock"), ("gpu", "kernel")} <= kinds, mode
    both = sorted((s["start"], s["kind"]) for s in spans if s["mode"] == "both" and s["lane"] == "host"
                  and s["kind"] in ("clock", "synchronize"))
    clocks = [i for i, (_, kind) in enumerate(both) if kind == "clock"]
    assert len(clocks) == 3 and all(i > 0 and both[i - 1][1] == "synchronize" for i in clocks)
    for mode in ("both", "before", "after", "none"):  # the host clock's marks line up with CUPTI's calls
        host = [s for s in spans if s["mode"] == mode and s["lane"] == "host"]
        for clock in (s for s in host if s["kind"] == "clock"):
            assert any(clock["start"] <= s["start"] <= s["end"] <= clock["end"] for s in host
                       if s["kind"] == "launch"), (mode, clock, host)
    assert drawn["headings"]["both"][1] is True and drawn["headings"]["none"][1] is False


def test_compare_transfer_flags_the_unsynchronised_clock_and_shows_overlap(tmp_path):
    """From pinned memory a non-blocking copy returns once queued: the host clock alone reads far
    above the link (flagged), the events figure is a real bandwidth; overlap saves time."""
    import json
    import statistics

    path = tmp_path / "t.json"
    res = CliRunner().invoke(app, ["compare-transfer", "--sizes", "64MB", "--iters", "5", "--overlap-size", "64MB",
                                   "--json", str(path)])
    assert res.exit_code == 0, res.output
    doc = json.loads(path.read_text())
    gbps = {(c["pinned"], c["non_blocking"], c["method"]): c["size"] / statistics.median(c["samples"]) / 1e9
            for c in doc["copies"]}
    valid = {(c["pinned"], c["non_blocking"], c["method"]): c["valid"] for c in doc["copies"]}
    assert len(gbps) == 12
    link = gbps[(True, True, "events")]
    assert 1 < link < 1000  # GB/s: a real link
    assert gbps[(True, True, "host clock only")] > 2 * link and not valid[(True, True, "host clock only")]
    assert gbps[(False, False, "events")] < link * 1.05 and valid[(False, False, "host clock only")]
    assert "NO: the copy may still be running" in res.output and "How to read this" in res.output
    o = doc["overlap"]
    assert statistics.median(o["overlapped"]) < 0.9 * statistics.median(o["sequential"])
