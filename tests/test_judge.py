"""The judge and the blind subject process on the CPU, against the hostile test bed's Python-level
attacks: each must be flagged with its reason, and the honest subject and the baseline must stay ok.
On the CPU the subject runs in the judge's process (so the attacks that search their own process for
the reference are GPU tests: tests/gpu/test_integrity_gpu.py); everything else is the same code.

The hostile family's bindings run unchanged over a stand-in extension that computes y = 2x + 1 in
PyTorch on the CPU and counts the elements it computed. The timer reports that count (1 ns per
element), so a figure that depends on its inputs staying the same shows without a wall clock."""

import os
import re
import random
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from cudabench.engine.subject_worker import SubjectHandler
from cudabench.measure import judge as judge_module
from cudabench.measure import judged_calls, taken
from cudabench.measure.settings import Settings
from cudabench.results.records.model import Case, IntegrityCheck
from cudabench.spec.registry import discover
from runs import inline_judge

HOSTILE = Path(__file__).resolve().parent / "hostile_kernels"
N = 1 << 20  # 1 ms per honest call on the work timer: far above any absolute allowance


class StandIn:
    """The hostile extension's honest kernel on the CPU, counting the elements it wrote."""

    def __init__(self):
        self.work = 0

    def hostile(self, x, y, mode):
        y.copy_(2 * x + 1)
        self.work += x.numel()


class WorkTimer:
    """A sample is 1 µs plus 1 ns per element the stand-in computed during the call."""

    name = "sync"
    batch = 1
    last = None

    def __init__(self, ext):
        self.ext = ext

    def prepare(self, call, estimate):
        pass

    def samples(self, call, count, before_each=None, keep=False):
        out = []
        for _ in range(count):
            before = self.ext.work
            value = call()
            out.append(1e-6 + 1e-9 * (self.ext.work - before))
            self.last = value if keep else None
        return out


@pytest.fixture(scope="module")
def registry():
    return discover([HOSTILE])


def make_judge(registry):
    ext = StandIn()
    return inline_judge(registry, HOSTILE, {"hostile": ext}, lambda timing: WorkTimer(ext))


def judge_one(registry, name, role="variant", inputs="uniform", judge=None, n=N, **settings):
    judge = judge or make_judge(registry)
    case = Case("hostile", (("n", n),), inputs=inputs)
    rule = {"kind": "repeat", "count": 20}
    return judge.run(registry.family("hostile"), case, name, role,
                     Settings(rule=rule, warmup_calls=2, warmup_seconds=0.0, **settings))


def failed(result):
    return {c.name: c.detail for c in result.integrity if c.failed}


@pytest.mark.parametrize("name, role", [("hostile-honest", "variant"), ("torch", "baseline")])
def test_the_honest_subject_and_the_baseline_stay_ok(registry, name, role):
    r = judge_one(registry, name, role)
    assert r.status == "ok", (r.error, r.skipped, failed(r))
    verdicts = {c.name: c.verdict for c in r.integrity}
    for check in ("fresh-output", "fresh-inputs", "determinism", "stream-order", "process-state", "threads",
                  "processes"):
        assert verdicts[check] == "pass", (check, r.integrity)


def test_work_done_only_on_calls_it_takes_for_checked_is_caught_on_random_timed_calls(registry, monkeypatch):
    # hostile-flag also sniffs for NaN in its fresh output; the host's malloc may hand it memory
    # another test NaN-filled, so here every new draw is checked (on a GPU all but two are: see
    # judged_calls.CHECKED_DRAWS)
    monkeypatch.setattr(judged_calls, "CHECKED_DRAWS", judged_calls.NEW_DRAWS - 1)  # and one other kind
    r = judge_one(registry, "hostile-flag")
    assert r.status == "INVALID"
    assert "fresh-output" in failed(r) and "chosen at random among the timed calls" in failed(r)["fresh-output"]


@pytest.mark.parametrize("name", ["hostile-memo", "hostile-partial"])
def test_a_figure_that_depends_on_unchanged_inputs_in_full_or_in_part_is_invalid(registry, name):
    r = judge_one(registry, name)
    assert r.status == "INVALID"
    # new values against the previous call's values written again: a cache of one entry hits on the
    # latter and misses on the former, whatever the judge's order. (The hot-loop check cannot be
    # relied on: on an H200 these calls were host-bound, and it is not run for those.)
    assert "fresh-inputs" in failed(r), r.integrity
    assert "fresh-output" not in failed(r)  # its outputs are right: only its hot figure lies


def test_a_cache_that_also_skips_work_on_some_new_calls_is_caught_every_time(registry):
    """hostile-partial-skip keeps 15 % of its last output on same values and on about half of the new ones:
    the new calls' median is fast only when most of them skip, and then a read one is wrong. With two of
    eight new calls read it passed about once in 40-60 tries; with all but two of six read, never."""
    for _ in range(12):
        r = judge_one(registry, "hostile-partial-skip")
        assert r.status in ("INVALID", "FAIL"), (r.status, r.integrity)
        assert r.status == "FAIL" or {"fresh-output", "fresh-inputs"} & set(failed(r)), r.integrity


@pytest.mark.parametrize("with_kind", [True, False])
def test_fewer_than_half_the_timed_new_calls_go_unread(with_kind):
    """The timed new calls are the plain new ones and the checked ones (another kind's call is not timed): a
    median of them that is fast needs a fast read one, so a subject cannot skip its work on unread calls alone."""
    session = judged_calls.JudgedCalls()
    session.judge = type("Judge", (), {"_rng": random.Random(1)})()
    for _ in range(200):
        plan = session._plan(with_kind=with_kind)
        timed_new = [step for step in plan if step in ("new", "checked")]
        assert 2 * plan.count("new") < len(timed_new), plan
        assert plan.count("kind") == with_kind and plan.count("repeat") == 1


class Alternating(random.Random):
    """The judge's secret order at its least lucky for it: new and same draws alternating."""

    def shuffle(self, x):
        if set(x) == {"new", "same"}:
            x[:] = [k for pair in zip(["new"] * len(x), ["same"] * len(x)) for k in pair][:len(x)]
        else:
            super().shuffle(x)


def test_a_one_entry_cache_is_caught_whatever_the_order_of_the_judged_calls(registry):
    judge = make_judge(registry)
    judge._rng = Alternating(7)
    r = judge_one(registry, "hostile-memo", judge=judge)
    assert "fresh-inputs" in failed(r), r.integrity


def test_a_subject_that_writes_into_its_inputs_is_reported_as_mutating_them(registry):
    r = judge_one(registry, "hostile-mutate")
    assert r.status == "INVALID" and r.stats is None
    assert f"it mutates its inputs: x changed in {N // 2} of {N} elements" in failed(r)["inputs"]


@pytest.mark.parametrize("name, why", [
    ("hostile-alias", "out shares memory with the input x"),
    ("hostile-strided", "out has strides [2], not a dense tensor"),
    ("hostile-subclass", "out is a tensor subclass Deferred, not a plain tensor"),
    ("hostile-float64", "out has dtype float64, the case is float32"),
])
def test_an_output_that_is_not_a_plain_dense_tensor_of_the_case_is_invalid(registry, name, why):
    r = judge_one(registry, name)
    assert r.status == "INVALID" and r.stats is None
    assert why in failed(r)["output"]


def test_a_subject_that_leaves_a_thread_working_is_invalid(registry):
    r = judge_one(registry, "hostile-thread", force=True)
    assert "threads" in failed(r) or r.status == "FAIL"
    if r.stats is not None:
        assert "hostile-pool" in failed(r)["threads"]


def dropping_judge(registry):
    """A judge, and the list that gains an entry each time it drops its subject process."""
    judge = make_judge(registry)
    dropped = []
    original = judge.subject.drop
    judge.subject.drop = lambda: (dropped.append(True), original())
    return judge, dropped


def unwatched(detail):
    return re.findall(r"unwatched thread \d+ \([^)]*\)", detail)


def test_threads_the_watch_never_recorded_are_read_as_linux_lists_them_and_end_the_subject_process(registry):
    """hostile-native-thread leaves a thread started with `_thread` (as an extension's C++ thread would be) that
    makes threading list it (a _DummyThread), and a threading.Thread started past the watch's wrapper: the
    watch records neither. Both run on after the subject is dropped, beside the next subjects' calls: the
    finish names both and says the process must go, and the judge drops it."""
    judge, dropped = dropping_judge(registry)
    r = judge_one(registry, "hostile-native-thread", judge=judge, fuzz=0)
    assert r.status == "INVALID" and len(unwatched(failed(r)["threads"])) == 2, r.integrity
    assert dropped  # replaced before the next subject
    honest = judge_one(registry, "hostile-honest", judge=judge, fuzz=0)
    assert honest.status == "ok", failed(honest)


def test_threads_a_skipped_subject_left_make_the_next_one_open_in_a_fresh_process(registry):
    """hostile-skip-thread starts its threads at bind time and then cannot run (skipped): no finish of its own
    reads them. The next subject's open finds threads the process is not known to have, so that process is
    replaced and the subject opened again in a fresh one: it is measured, not blamed. (Here the "fresh" process
    is this one, greeted again, which takes the threads running then as its own, as a fresh process's hello
    does; the GPU attack matrix runs it in real subject processes.)"""
    judge, dropped = dropping_judge(registry)
    skipped = judge_one(registry, "hostile-skip-thread", judge=judge, fuzz=0)
    assert skipped.skipped and "never find" in skipped.skipped
    assert not dropped
    honest = judge_one(registry, "hostile-honest", judge=judge, fuzz=0)
    assert dropped and honest.status == "ok", (honest.error, failed(honest))


def test_a_thread_started_by_code_the_restore_runs_is_read_after_it(registry):
    """hostile-late-thread leaves in a cudabench module an object that starts threads when it is freed: the
    state guard's restore frees it, after the subject's own threads were read."""
    judge, dropped = dropping_judge(registry)
    r = judge_one(registry, "hostile-late-thread", judge=judge, fuzz=0)
    assert r.status == "INVALID" and len(unwatched(failed(r)["threads"])) == 2, r.integrity
    assert "_hostile_late" in failed(r)["process-state"] and dropped
    honest = judge_one(registry, "hostile-honest", judge=judge, fuzz=0)
    assert honest.status == "ok", failed(honest)


def test_work_handed_to_a_process_of_its_own_is_invalid_and_the_process_is_ended(registry):
    """hostile-helper's helper computes all but one element: right outputs, and the work the subject
    process itself does (what the timer here counts, as CUPTI records only that process) is one element's."""
    from cudabench.measure import processes

    before = processes.descendants([os.getpid()])
    r = judge_one(registry, "hostile-helper")
    honest = judge_one(registry, "hostile-honest")
    assert r.status == "INVALID" and "started processes of its own" in failed(r)["processes"], r.integrity
    assert r.check.passed and r.stats.median < honest.stats.median / 100  # the figure it would have had
    assert processes.descendants([os.getpid()]) <= before, [processes.describe(p) for p in processes.descendants([os.getpid()])]


def test_a_process_planted_after_the_watch_ended_is_ended_before_the_next_subject_and_its_thread_fails(registry):
    """hostile-plant's random-shape binds leave a thread that starts a process once the judge stopped
    watching: the thread fails its random shapes, and the process is ended before the next subject opens."""
    from cudabench.measure import processes

    judge = make_judge(registry)
    before = {p for p in processes.descendants([os.getpid()]) if processes.running(p)}
    r = judge_one(registry, "hostile-plant", judge=judge)
    assert r.status == "INVALID" and "left host threads running: hostile-planter" in failed(r)["shapes"], r.integrity
    time.sleep(1.0)  # the planted process starts
    planted = {p for p in processes.descendants([os.getpid()]) if processes.running(p)} - before
    assert planted
    honest = judge_one(registry, "hostile-honest", judge=judge)
    check = next(c for c in honest.integrity if c.name == "processes")
    assert honest.status == "ok" and check.verdict == "pass" and "left by an earlier subject's code" in check.detail
    assert not any(processes.running(p) for p in planted)


def test_a_kernel_written_for_the_timed_shape_fails_at_random_shapes_within_its_constraints(registry):
    for _ in range(3):  # right at n = 2^20; at the default two shapes, the first is ragged every time
        r = judge_one(registry, "hostile-shape")
        assert r.status == "INVALID" and "wrong at a random shape within its constraints" in failed(r)["shapes"]
    honest = judge_one(registry, "hostile-honest", fuzz=8)
    shapes = next(c for c in honest.integrity if c.name == "shapes")
    assert shapes.verdict == "pass" and shapes.detail.count("n=") == 8


def test_a_variants_random_shapes_are_checked_once_per_run(registry, monkeypatch):
    calls = []
    original = SubjectHandler.handle
    monkeypatch.setattr(SubjectHandler, "handle", lambda self, r: calls.append(r["op"]) or original(self, r))
    judge = make_judge(registry)
    first = judge_one(registry, "hostile-honest", judge=judge)
    opened = calls.count("open")
    second = judge_one(registry, "hostile-honest", judge=judge, n=N // 2)  # the sweep's next point
    assert calls.count("open") - opened == 1  # no random shapes opened again
    shapes = [next(c for c in r.integrity if c.name == "shapes") for r in (first, second)]
    assert shapes[1].verdict == "pass" and shapes[1].detail == shapes[0].detail + " (checked at its first case in this run)"


def test_fuzz_0_says_the_shapes_were_not_checked(registry):
    r = judge_one(registry, "hostile-shape", fuzz=0)
    assert r.status == "ok"
    assert any(c.name == "shapes" and c.detail == "not checked: --fuzz 0" for c in r.integrity)


def test_patching_the_harness_timers_is_seen_and_undone(registry):
    from cudabench.measure import timers

    before = timers.SyncTimer.samples
    r = judge_one(registry, "hostile-patch-timer")
    assert timers.SyncTimer.samples is before  # restored for the next subject
    assert r.status == "INVALID" and "cudabench.measure.timers.SyncTimer.samples" in failed(r)["process-state"]


def test_swapping_the_code_of_the_harness_timers_in_place_is_seen_and_undone(registry):
    """The function objects stay where they were, so a comparison of names by identity sees nothing; what
    they run is fake (0 s per call) for this subject and every later one in the process."""
    from cudabench.measure import timers

    code = timers.EventTimer.samples.__code__
    r = judge_one(registry, "hostile-swap-code", fuzz=0)
    assert timers.EventTimer.samples.__code__ is code  # restored for the next subject
    assert r.status == "INVALID"
    assert "cudabench.measure.timers.EventTimer.samples.__code__" in failed(r)["process-state"]
    honest = judge_one(registry, "hostile-honest", fuzz=0)
    assert honest.status == "ok", failed(honest)


def test_replacing_the_request_handler_on_the_object_itself_is_seen_and_undone(registry):
    """The handler outlives the subject: its halved replies would reach every later subject's figures."""
    judge = make_judge(registry)
    r = judge_one(registry, "hostile-patch-worker", judge=judge, fuzz=0)
    assert r.status == "INVALID"
    assert "cudabench.engine.subject_worker.SubjectHandler().handle" in failed(r)["process-state"]
    honest = judge_one(registry, "hostile-honest", judge=judge, fuzz=0)  # the same subject process
    assert honest.status == "ok", failed(honest)
    assert honest.stats.median == pytest.approx(1e-6 + 1e-9 * N)  # whole figures again


def test_the_state_guard_sees_the_standard_json_and_the_watched_objects_and_modules_replaced():
    import json
    import types

    from cudabench.measure.state import StateGuard

    class Reader:
        def read(self):
            return "request"

    class Forger(Reader):
        pass

    guard, reader, extension = StateGuard(cuda=False), Reader(), types.ModuleType("timex_ext")
    extension.forward = abs
    guard.objects.watch(reader)
    guard.objects.watch(extension)
    dumps = json.dumps
    json.dumps = lambda *a, **k: "{}"
    reader.read = lambda: "forged"
    reader.__class__ = Forger
    extension.forward = lambda x: x
    extension.added = print
    patched = guard.restore().patched
    label = f"{Reader.__module__}.{Reader.__qualname__}()"
    assert set(patched) == {"json.dumps", f"{label}.__class__", f"{label}.read", "timex_ext.forward", "timex_ext.added"}
    assert json.dumps is dumps and type(reader) is Reader and reader.read() == "request"
    assert extension.forward is abs and not hasattr(extension, "added")
    assert not guard.restore()  # pristine again
    reader.cache = "made by the harness"
    guard.objects.accept(reader, "cache")  # the harness's own change: compared from now on
    assert not guard.restore()
    reader.cache = "replaced"
    assert guard.restore().patched == (f"{label}.cache",) and reader.cache == "made by the harness"


def test_an_extension_is_watched_from_the_moment_it_is_made(registry):
    """Not from its family's first subject: a subject of another family could load it first and patch
    it, or put a module of its own in the process's cache of loaded libraries."""
    import types
    from pathlib import Path

    from cudabench.measure.blind import BlindRunner
    from cudabench.spec import build

    runner = BlindRunner(registry, "cpu")
    loaded, path, made = {}, Path("/tmp/timex_abc.so"), types.ModuleType("timex_ext")
    made.forward = abs
    build.tell_loaded(loaded, path, made)
    made.forward = lambda x: x
    loaded[path] = types.ModuleType("forged")
    patched = runner.guard.restore().patched
    assert set(patched) >= {"timex_ext.forward", f"the loaded extension {path}"}
    assert loaded[path] is made and made.forward is abs


def test_a_runner_that_is_gone_is_no_longer_told_of_extensions_nor_kept_alive(registry):
    """Each runner's guard watches the extensions made after it: a process that makes many runners (the
    CPU tests, an in-process judge) must not keep every one of them, with its guard's snapshot, alive."""
    import gc
    import types
    import weakref
    from pathlib import Path

    from cudabench.measure.blind import BlindRunner
    from cudabench.spec import build

    kept = BlindRunner(registry, "cpu")
    before = len(build.ON_LOAD)
    gone = [weakref.ref(BlindRunner(registry, "cpu")) for _ in range(3)]
    gc.collect()
    assert all(r() is None for r in gone)
    loaded, path, made = {}, Path("/tmp/timex_gone.so"), types.ModuleType("timex_gone")
    made.forward = abs
    build.tell_loaded(loaded, path, made)
    assert len(build.ON_LOAD) <= before  # the dead ones dropped as they were met
    made.forward = len
    assert "timex_gone.forward" in kept.guard.restore().patched  # the live one still watches


def test_replacing_a_pytorch_function_a_later_subject_uses_is_seen_and_undone(registry):
    """A variant that slows the baseline's own operator (2 * x + 1 calls Tensor.__rmul__) would make
    every speedup against it look better."""
    import torch

    before = torch.Tensor.__rmul__
    r = judge_one(registry, "hostile-patch-library", fuzz=0)
    assert r.status == "INVALID" and "torch.Tensor.__rmul__" in failed(r)["process-state"]
    assert torch.Tensor.__rmul__ is before
    baseline = judge_one(registry, "torch", role="baseline", fuzz=0)
    assert baseline.status == "ok", failed(baseline)


def test_a_signal_timer_left_for_later_subjects_is_seen_and_stopped(registry):
    """No thread and no patched function: a handler on an interval timer that would take half of every later
    subject's time in the same process (the baseline's, to make a speedup against it look better)."""
    import signal

    r = judge_one(registry, "hostile-signal-timer", fuzz=0)
    try:
        assert r.status == "INVALID" and "the SIGALRM handler" in failed(r)["process-state"], r.integrity
        assert "the real interval timer" in failed(r)["process-state"]
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
        baseline = judge_one(registry, "torch", role="baseline", fuzz=0)
        assert baseline.status == "ok", failed(baseline)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0.0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)


def test_which_calls_are_checked_is_the_judges_secret(registry, monkeypatch):
    """The subject process receives the same request for every judged call, and no request or reply
    names a seed, a check or a reference."""
    seen = []
    original = SubjectHandler.handle

    def spy(self, request):
        seen.append(dict(request))
        return original(self, request)

    monkeypatch.setattr(SubjectHandler, "handle", spy)
    judge_one(registry, "hostile-honest")
    calls = [r for r in seen if r["op"] == "call"]
    fuzzed = Settings().fuzz  # each random shape's check is one more call
    assert len(calls) == 1 + judged_calls.FRESH_CALLS + fuzzed and all(r == {"op": "call"} for r in calls)
    text = repr(seen)
    for word in ("seed\": 1", "reference", "tolerance", "checked"):
        assert word not in text
    ops = [r["op"] for r in seen]
    assert all(ops[i - 2:i] == ["poison", "call"] or i < 2 for i, op in enumerate(ops, 1) if op == "call")


def test_under_graph_timing_the_determinism_repeat_is_an_eager_call(registry, monkeypatch):
    """A replay reuses the graph's own memory and runs none of the subject's Python, so uninitialised
    memory reads the same on every replay: the repeat runs eagerly, on poisoned memory."""
    seen = []
    original = SubjectHandler.handle
    monkeypatch.setattr(SubjectHandler, "handle", lambda self, request: seen.append(dict(request))
                        or original(self, request))
    judge_one(registry, "hostile-honest", timing="graph", fuzz=0)
    assert [r for r in seen if r.get("eager")] == [{"op": "call", "eager": True}]


def bare_session(timing="sync"):
    session = judge_module.Session.__new__(judge_module.Session)
    session.settings = Settings(timing=timing)
    return session


def hot_result(median):
    from cudabench.results.records.model import Result
    from cudabench.results.records.stats import summarize

    return Result(Case("hostile", (("n", 1),)), "s", "variant", stats=summarize([median] * 20))


@pytest.mark.parametrize("timing", ["sync", "events"])
def test_a_host_bound_calls_judged_calls_are_compared_by_kernel_time(timing):
    """A call whose figure is mostly the host's launching is slower after any pause (an honest cuDNN
    conv1d took 109 µs in the hot loop, 227 µs in judged calls), by more than a memo saves: its judged
    calls are timed by CUPTI kernel time and held to the CUPTI pass's."""
    session = bare_session(timing)
    result = hot_result(109e-6)
    cupti = {"busy": [10e-6] * 5, "kernel_samples": [9e-6] * 5}
    assert session._judged_timing(result, cupti) == "cupti"
    host_jitter = session._hot_loop([9.1e-6] * 8, result)
    assert host_jitter.verdict == "pass" and "kernel time (CUPTI)" in host_jitter.detail
    skipped_work = session._hot_loop([30e-6] * 8, result)
    assert skipped_work.verdict == "fail"
    memo = session._fresh_figure({"new": [45.9e-6] * 7, "same": [10.9e-6] * 7}, result)
    assert memo.verdict == "fail" and "4.21x" in memo.detail
    # a call the GPU is busy with keeps its own timer for the judged calls
    assert bare_session(timing)._judged_timing(result, {"busy": [100e-6] * 5, "kernel_samples": [99e-6] * 5}) \
        == timing
    assert bare_session("graph")._judged_timing(result, cupti) == "graph"


def test_under_sync_a_call_whose_host_part_exceeds_the_slack_is_judged_by_kernel_time():
    """Under sync the host's part of a figure (launches, autograd) is what the judge's pause slows:
    an honest attn-flash1 fwd+bwd at 370 µs in the hot loop took 590 µs in judged calls on the H200's
    host, its kernel time 299 and 300 µs. Events hide the launch, so only a host-bound call is."""
    gpu_most = {"busy": [299e-6] * 5, "kernel_samples": [298e-6] * 5}
    assert bare_session("sync")._judged_timing(hot_result(370e-6), gpu_most) == "cupti"
    assert bare_session("events")._judged_timing(hot_result(370e-6), gpu_most) == "events"
    # a call the GPU is busy with for nearly all of its figure keeps its wall time
    assert bare_session("sync")._judged_timing(hot_result(310e-6), gpu_most) == "sync"


def test_a_host_bound_subjects_judged_calls_are_one_round_of_kernel_time(registry, monkeypatch):
    seen = []
    original = SubjectHandler.handle
    monkeypatch.setattr(SubjectHandler, "handle", lambda self, request: seen.append(dict(request))
                        or original(self, request))

    def host_bound(self, result, cupti):
        self.hot_kernel = [1e-6 + 1e-9 * N] * 5  # the work timer's figure of an honest call
        return "cupti"

    monkeypatch.setattr(judge_module.Session, "_judged_timing", host_bound)
    r = judge_one(registry, "hostile-honest", fuzz=0)
    ops = [q["op"] for q in seen]
    start, end = ops.index("round"), ops.index("samples")
    assert start == ops.index("hot") + 1 and ops[start + 1:end].count("call") == judged_calls.FRESH_CALLS
    assert r.status == "ok", failed(r)


def test_a_timing_verdict_stands_only_if_a_second_round_of_judged_calls_fails_too(registry, monkeypatch):
    """One unlucky round (a host that paused) is cleared by a second; a cache fails both."""
    seen = []
    original = SubjectHandler.handle
    monkeypatch.setattr(SubjectHandler, "handle", lambda self, request: seen.append(dict(request))
                        or original(self, request))
    real = judge_module.Session._fresh_figure
    rounds = []

    def unlucky_first_round(self, samples, result):
        rounds.append(1)
        check = real(self, samples, result)
        if len(rounds) == 1:
            return IntegrityCheck("fresh-inputs", "fail", "1.20x slower (unlucky)")
        return check

    monkeypatch.setattr(judge_module.Session, "_fresh_figure", unlucky_first_round)
    r = judge_one(registry, "hostile-honest", fuzz=0)
    assert r.status == "ok", failed(r)
    verdict = {c.name: c for c in r.integrity}["fresh-inputs"]
    assert verdict.verdict == "pass" and "second round" in verdict.detail and "unlucky" in verdict.detail
    assert sum(q["op"] == "call" for q in seen) == 1 + 2 * judged_calls.FRESH_CALLS
    monkeypatch.setattr(judge_module.Session, "_fresh_figure", real)
    memo = judge_one(registry, "hostile-memo", fuzz=0)
    assert "again in a second round" in failed(memo)["fresh-inputs"]


def test_a_subject_that_skips_its_work_in_the_second_round_is_caught_by_its_checked_calls(registry, monkeypatch):
    """The second round clears a first round's timing failure, so it is made like the first, checked calls
    included: a subject that tells the rounds apart (here by counting the input values it has seen) and
    skips its work in the second fails there."""
    class SkipsLater(StandIn):
        def __init__(self):
            super().__init__()
            self.seen = set()

        def hostile(self, x, y, mode):
            self.seen.add(float(x[0]))
            if len(self.seen) <= 1 + judged_calls.NEW_DRAWS:  # the first values and the first round's
                super().hostile(x, y, mode)

    real = judge_module.Session._fresh_figure
    rounds = []

    def unlucky_first_round(self, samples, result):
        rounds.append(1)
        return IntegrityCheck("fresh-inputs", "fail", "1.20x (unlucky)") if len(rounds) == 1 else real(self, samples, result)

    monkeypatch.setattr(judge_module.Session, "_fresh_figure", unlucky_first_round)
    ext = SkipsLater()
    judge = inline_judge(registry, HOSTILE, {"hostile": ext}, lambda timing: WorkTimer(ext))
    r = judge_one(registry, "hostile-honest", judge=judge, fuzz=0)
    assert len(rounds) == 2 and r.status == "INVALID" and "fresh-output" in failed(r), (r.status, r.integrity)


def test_the_references_of_a_round_are_made_before_its_first_call(registry, monkeypatch):
    """A pause to compute a reference just before a call would tell a kernel that reads the GPU's clock
    which judged calls are read: every reference of a round is made before the round starts."""
    calls, at = [0], []
    original = SubjectHandler.handle

    def counted(self, request):
        calls[0] += request.get("op") == "call"
        return original(self, request)

    real = judge_module.Judge.reference
    monkeypatch.setattr(SubjectHandler, "handle", counted)
    monkeypatch.setattr(judge_module.Judge, "reference", lambda self, *a, **k: at.append(calls[0]) or real(self, *a, **k))
    r = judge_one(registry, "hostile-honest", fuzz=0)
    assert r.status == "ok", failed(r)
    assert sorted(set(at)) == [0, 1], at  # before the first check, and before the first round


def test_the_outputs_of_a_round_are_compared_after_its_last_call(registry, monkeypatch):
    """Every call of a round is taken alike right after it runs (its outputs cloned, its inputs checked):
    a compare right after a checked call would be a longer pause than after any other."""
    calls, at = [0], []
    original = SubjectHandler.handle

    def counted(self, request):
        calls[0] += request.get("op") == "call"
        return original(self, request)

    real = taken.compare
    monkeypatch.setattr(SubjectHandler, "handle", counted)
    monkeypatch.setattr(taken, "compare", lambda *a, **k: at.append(calls[0]) or real(*a, **k))
    r = judge_one(registry, "hostile-honest", fuzz=0)
    assert r.status == "ok", failed(r)
    assert set(at) == {1, 1 + judged_calls.FRESH_CALLS}, at  # the first check, then after the round


def test_a_first_round_failure_is_confirmed_by_either_timing_check_of_the_second():
    from cudabench.measure.rounds import confirmed as _confirmed
    from cudabench.results.records.model import IntegrityCheck as C

    first = [C("fresh-inputs", "fail", "new slower"), C("hot-loop", "pass", "ok")]
    # a cache that stops caching once it sees more judged calls than a round has: hot-loop fails
    stopped = _confirmed(first, [C("fresh-inputs", "pass", "alike"), C("hot-loop", "fail", "hot faster")])
    assert [c.verdict for c in stopped] == ["fail", "pass"] and "hot faster" in stopped[0].detail
    cleared = _confirmed(first, [C("fresh-inputs", "pass", "alike"), C("hot-loop", "pass", "ok")])
    assert [c.verdict for c in cleared] == ["pass", "pass"] and "new slower" in cleared[0].detail


@pytest.mark.parametrize("kind", ["outliers", "pareto", "large"])
def test_a_kernel_tuned_to_its_default_inputs_fails_on_other_kinds(registry, kind, monkeypatch):
    assert judge_one(registry, "hostile-tuned", inputs=kind).status == "FAIL"
    # in a default run, one judged call draws another kind at random; here the judge's pick is `kind`
    monkeypatch.setattr(judged_calls, "other_input_kinds", lambda family, case: [kind])
    tuned = judge_one(registry, "hostile-tuned")
    assert tuned.check.passed and tuned.status == "INVALID"
    assert failed(tuned)["distribution"].startswith(f"wrong on {kind} inputs (drawn at random)")
    honest = judge_one(registry, "hostile-honest")
    assert honest.status == "ok"
    assert next(c for c in honest.integrity if c.name == "distribution").detail.startswith(f"right on {kind} inputs")


def test_the_kind_a_judged_call_draws_is_random_and_never_the_cases_own(registry):
    picks = set()
    for _ in range(12):
        r = judge_one(registry, "hostile-honest")
        detail = next(c for c in r.integrity if c.name == "distribution").detail
        picks.add(detail.split(" inputs")[0].removeprefix("right on "))
    assert len(picks) >= 2 and "uniform" not in picks
    assert picks <= set(registry.family("hostile").all_input_kinds)


@pytest.mark.parametrize("kind", ["outliers", "pareto", "constant", "zeros", "large"])
def test_every_family_takes_the_generic_input_kinds_and_honest_ops_pass_them(registry, kind):
    r = judge_one(registry, "hostile-honest", inputs=kind)
    assert r.status == "ok", (r.skipped, r.error, failed(r))
    assert r.case.key.endswith(f"{kind}]/fwd")  # recorded: the kind is part of the case


def test_the_generic_kinds_are_what_they_say():
    from cudabench.spec.distributions import reshape

    gen = torch.Generator().manual_seed(0)
    x = {"x": torch.empty(100_000).uniform_(-1, 1, generator=gen), "eps": 0.5}
    outliers = reshape(x, "outliers", gen)["x"]
    assert (outliers.abs() > 20).float().mean().item() == pytest.approx(0.01, abs=0.003)
    assert reshape(x, "pareto", gen)["x"].abs().max() > 50
    constant = reshape(x, "constant", gen)["x"]
    assert torch.all(constant == constant[0]) and reshape(x, "constant", gen)["eps"] == 0.5
    zeros = reshape(x, "zeros", gen)["x"]
    assert (zeros == 0).float().mean().item() == pytest.approx(0.175, abs=0.02)
    assert torch.signbit(zeros[zeros == 0]).any() and not torch.signbit(zeros[zeros == 0]).all()


@pytest.mark.parametrize("family, shape, dtype", [
    ("add2", (("n", 4096),), "float32"),
    ("timex", (("B", 2), ("C", 4), ("T", 64)), "bfloat16"),
    ("attention", (("B", 1), ("H", 2), ("N", 64), ("D", 64), ("causal", 1)), "float16"),
])
def test_the_large_kind_goes_toward_overflow_as_far_as_the_float32_reference_stays_right(family, shape, dtype):
    from cudabench.measure.check import reference_results, relative_error
    from cudabench.measure.subject import case_inputs
    from cudabench.measure.workload import make_workload

    reg = discover()
    fam = reg.family(family)
    small, _ = case_inputs(fam, Case(family, shape, dtype=dtype), 3, "cpu")
    large, _ = case_inputs(fam, Case(family, shape, dtype=dtype, inputs="large"), 3, "cpu")
    biggest = max(float(v.abs().max()) for v in large.values() if torch.is_tensor(v))
    assert biggest > 16 * max(float(v.abs().max()) for v in small.values() if torch.is_tensor(v))
    as32 = {k: (v.float() if torch.is_tensor(v) else v) for k, v in large.items()}
    out32 = make_workload(fam.reference, as32, "fwd").results()["out"]
    want = reference_results(fam, large, "fwd")["out"]
    assert torch.isfinite(out32).all() and relative_error(out32, want) <= fam.tolerance_for(dtype)
    assert torch.isfinite(out32.to(getattr(torch, dtype))).all()  # an honest kernel can store it
    if family == "add2":  # nothing but the inputs' own range limits a sum of two
        assert biggest > torch.finfo(torch.float32).max / 2**20


@pytest.mark.parametrize("family, shape, dtype, direction, kind, honest", [
    ("timex", (("B", 2), ("C", 4), ("T", 64)), "float32", "fwdbwd", "outliers", True),
    # float16 sums of outliers overflow float16 whatever the kernel does
    ("timex", (("B", 2), ("C", 8), ("T", 512)), "float16", "fwd", "outliers", False),
    # attention's gradients on all-equal inputs are rounding noise around zero
    ("attention", (("B", 1), ("H", 2), ("N", 64), ("D", 64), ("causal", 1)), "float32", "fwdbwd", "constant", False),
    ("attention", (("B", 1), ("H", 2), ("N", 64), ("D", 64), ("causal", 1)), "float32", "fwdbwd", "large", True),
])
def test_a_kind_is_drawn_only_where_an_honest_float32_kernel_can_pass(family, shape, dtype, direction, kind, honest):
    from cudabench.measure.kinds import honest_can_pass
    from cudabench.measure.subject import case_inputs

    fam = discover().family(family)
    case = Case(family, shape, direction, dtype=dtype, inputs=kind)
    inputs, grad_out = case_inputs(fam, case, 5, "cpu")
    assert honest_can_pass(fam, case, inputs, grad_out) is honest


ATTENTION = (("B", 1), ("H", 2), ("N", 128), ("D", 64), ("causal", 1))


@pytest.mark.parametrize("family, shape, dtype, direction, kind, held_to", [
    # outliers and pareto: an honest flash kernel's dK reaches 0.015-0.033 on some draws
    # (tests/test_emulated_kernels.py), so some calls are held to what the rounded math errs, doubled
    ("attention", ATTENTION, "bfloat16", "fwdbwd", "outliers", "widened"),
    ("attention", ATTENTION, "float16", "fwdbwd", "outliers", "widened"),
    ("attention", ATTENTION, "bfloat16", "fwdbwd", "pareto", "widened"),
    ("attention", ATTENTION, "bfloat16", "fwdbwd", "zeros", "tolerance"),
    ("attention", ATTENTION, "bfloat16", "fwd", "outliers", "tolerance"),
    ("attention", ATTENTION, "float32", "fwdbwd", "outliers", "tolerance"),
    # timex's kernels accumulate in float32 throughout: it declares nothing, its tolerance stays
    ("timex", (("B", 2), ("C", 4), ("T", 64)), "bfloat16", "fwdbwd", "outliers", "tolerance"),
])
def test_a_call_on_another_kind_is_held_to_what_a_rounding_family_s_math_allows(family, shape, dtype, direction,
                                                                                 kind, held_to):
    from cudabench.measure.check import reference_results
    from cudabench.measure.kinds import ROUNDING_CAP, honest_can_pass, rounding_allowance
    from cudabench.measure.subject import case_inputs

    fam = discover().family(family)
    case = Case(family, shape, direction, dtype=dtype, inputs=kind)
    tolerance = fam.tolerance_for(dtype)
    allowed = []
    for seed in range(12):
        inputs, grad_out = case_inputs(fam, case, seed, "cpu")
        reference = reference_results(fam, inputs, direction, grad_out)
        assert honest_can_pass(fam, case, inputs, grad_out, reference)  # the float32 rule takes every draw
        allowed.append(rounding_allowance(fam, case, inputs, grad_out, reference))
    if held_to == "tolerance":
        assert allowed == [tolerance] * 12, allowed
    else:  # never below the family's, never past the cap, wider on some draws
        assert all(tolerance <= a <= ROUNDING_CAP * tolerance for a in allowed) and max(allowed) > tolerance, allowed


def test_the_rounded_attention_reference_errs_as_a_flash_kernel_does():
    """On the draws above, the rounded math errs like attn-flash3 on the emulator: dK up to 0.03 on
    outliers, 2.5e-3 on the family's own normal values."""
    from cudabench.measure.check import reference_results, relative_error
    from cudabench.measure.subject import case_inputs
    from cudabench.measure.workload import make_workload

    fam = discover().family("attention")
    worst = {}
    for kind in ("uniform", "outliers"):
        case = Case("attention", ATTENTION, "fwdbwd", dtype="bfloat16", inputs=kind)
        errors = []
        for seed in range(12):
            inputs, grad_out = case_inputs(fam, case, seed, "cpu")
            reference = reference_results(fam, inputs, "fwdbwd", grad_out)
            with torch.enable_grad():
                got = make_workload(fam.rounded_reference, inputs, "fwdbwd", fam.grad_inputs, grad_out).results()
            errors.append(max(relative_error(v.detach(), reference[k]) for k, v in got.items()))
        worst[kind] = max(errors)
    tolerance = fam.tolerance_for("bfloat16")
    assert worst["uniform"] < tolerance / 4 < tolerance < worst["outliers"] < 3 * tolerance, worst


def test_a_baselines_distribution_is_not_checked(registry):
    r = judge_one(registry, "torch", role="baseline")
    check = next(c for c in r.integrity if c.name == "distribution")
    assert check.verdict == "not run" and check.detail == "baselines are PyTorch's own"


def test_each_judged_call_after_the_hot_loop_follows_an_untimed_call_on_the_values_before_it(registry,
                                                                                              monkeypatch):
    """The GPU as the hot loop leaves it (data in L2, clocks up) before every judged call: one call on
    the values the subject last saw, made before the judge writes the next values, so that a cache
    of the previous values hits on a "same" call as in the hot loop and misses on a new one."""
    seen_x = []

    class Recording(StandIn):
        def hostile(self, x, y, mode):
            seen_x.append(float(x[0]))
            super().hostile(x, y, mode)

    ext = Recording()
    judge = inline_judge(registry, HOSTILE, {"hostile": ext}, lambda timing: WorkTimer(ext))
    warm = []
    original = SubjectHandler.handle

    def spy(self, request):
        before = len(seen_x)
        reply = original(self, request)
        if request["op"] == "poison":
            warm.append((before, len(seen_x)))
        return reply

    monkeypatch.setattr(SubjectHandler, "handle", spy)
    r = judge_one(registry, "hostile-honest", judge=judge, fuzz=0)
    assert r.status == "ok", failed(r)
    after_hot = [(b, a) for b, a in warm if a == b + 1]
    assert len(after_hot) == judged_calls.FRESH_CALLS  # the first check's poison has no call before it
    assert all(seen_x[b] == seen_x[b - 1] for b, _ in after_hot)


def test_a_call_that_recorded_no_kernel_time_is_judged_not_a_crash():
    """A subject whose work runs outside its call (a thread of its own) records no kernel in the CUPTI
    pass: the hot-loop verdict names it instead of dividing by zero."""
    from cudabench.measure import integrity
    from cudabench.results.records.stats import summarize

    check = integrity.hot_loop(summarize([0.0] * 5), summarize([10e-6] * 8), 0.1, 3e-6)
    assert check.verdict == "fail" and "infinitely faster" in check.detail
    fresh = integrity.fresh_inputs(summarize([0.0] * 7), summarize([10e-6] * 7), 0.1, 1e-6)
    assert fresh.verdict == "fail" and "infinitely slower" in fresh.detail


def test_a_verdict_on_random_shapes_from_another_gpus_judge_is_taken_and_its_own_wins(registry, monkeypatch):
    """With several GPUs, the caller sends a variant's random-shapes verdict from the GPU that checked it
    first; the other judges do not check again, a failure stays a failure, and a judge that checked the
    variant itself keeps its own verdict."""
    calls = []
    original = SubjectHandler.handle
    monkeypatch.setattr(SubjectHandler, "handle", lambda self, r: calls.append(r["op"]) or original(self, r))
    case = Case("hostile", (("n", N),))
    settings = Settings(rule={"kind": "repeat", "count": 20}, warmup_calls=2, warmup_seconds=0.0)
    family = registry.family("hostile")
    elsewhere = make_judge(registry)
    r = elsewhere.run(family, case, "hostile-honest", "variant", settings, shapes=("pass", "also right at n=3, n=77"))
    shapes = next(c for c in r.integrity if c.name == "shapes")
    assert calls.count("open") == 1 and r.status == "ok"  # only the timed case: no random shape opened
    assert shapes.detail == "also right at n=3, n=77 (checked at its first case in this run)"
    failing = make_judge(registry).run(family, case, "hostile-honest", "variant", settings,
                                       shapes=("fail", "wrong at a random shape within its constraints: n=3"))
    assert failing.status == "INVALID" and "n=3" in failed(failing)["shapes"]
    own = make_judge(registry)
    first = own.run(family, case, "hostile-honest", "variant", settings)
    again = own.run(family, replace(case, shape=(("n", N // 2),)), "hostile-honest", "variant", settings,
                    shapes=("fail", "from elsewhere"))
    assert next(c for c in again.integrity if c.name == "shapes").verdict == "pass" and first.status == again.status == "ok"


def test_a_spec_function_that_raises_is_named_with_its_line(tmp_path):
    """A bug in a family's own `work` (or `reduction`) is the user's: one paragraph that names the function
    and its line in spec.py, not the worker's bare "KeyError: 'T'"."""
    import shutil

    from cudabench.errors import ConfigError

    shutil.copytree(HOSTILE / "hostile", tmp_path / "hostile")
    spec = tmp_path / "hostile" / "spec.py"
    spec.write_text(spec.read_text() + "\n\ndef broken_work(params, direction):\n    return params['T'], 0\n\n\n"
                    "import dataclasses\nFAMILY = dataclasses.replace(FAMILY, work=broken_work)\n")
    line = spec.read_text().splitlines().index("    return params['T'], 0") + 1
    registry = discover([tmp_path])
    with pytest.raises(ConfigError) as info:
        judge_one(registry, "torch", role="baseline", fuzz=0, judge=make_judge(registry))
    message = info.value.message
    assert f"spec.py:{line}" in message and "`work` (family hostile) raised KeyError: 'T'" in message, message
