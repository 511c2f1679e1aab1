"""The adversary families (tests/hostile_kernels) against every timer: each misbehaviour is caught,
each crash or hang is recorded against its own subject, and the honest subjects around them are
measured normally."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cudabench.cli.app import app
from cudabench.engine.plan import RunOptions, plan
from cudabench.measure import integrity
from cudabench.measure.loop import Warmup
from cudabench.measure.stop import FixedCount
from cudabench.spec.registry import discover
from runs import run_in_workers

pytestmark = pytest.mark.gpu
HOSTILE = Path(__file__).parents[1] / "hostile_kernels"
SHAPE = {"n": 1 << 24}


@pytest.fixture(scope="module")
def hostile():
    return discover([HOSTILE])


def run(hostile, names, timeout=60.0, **kw):
    options = RunOptions(rule=FixedCount(20), warmup=Warmup(3, 0.0), timeout=timeout, **kw)
    return {r.subject: r for r in run_in_workers(options, plan(hostile, names, SHAPE, options), [HOSTILE])}


def failed_checks(result):
    return {c.name for c in result.integrity if c.failed}


@pytest.mark.parametrize("timing", ["sync", "events", "graph", "cupti"])
def test_every_misbehaviour_is_caught_under_every_timer(hostile, timing):
    results = run(hostile, ["hostile-honest", "hostile-side-stream", "hostile-side-stream-late", "hostile-cached"],
                  timing=timing)
    honest, side, late, cached, torch_ = (results[n] for n in ("hostile-honest", "hostile-side-stream",
                                                               "hostile-side-stream-late", "hostile-cached", "torch"))
    assert honest.status == "ok" and torch_.status == "ok", (honest.integrity, torch_.integrity)
    assert side.status == "INVALID" and "stream-order" in failed_checks(side)
    # its launch comes after a 1 ms hold ran out: the probe is made again, held longer
    assert late.status == "INVALID" and "stream-order" in failed_checks(late), late.integrity
    if timing in ("events", "graph"):  # the timer saw less than the GPU did
        assert "timed-window" in failed_checks(side)
    assert cached.status == "INVALID"
    assert {"fresh-output", "no-work"} <= failed_checks(cached)
    if timing in ("graph", "cupti"):
        # a replay or kernel time of nothing is zero; under events a call that launches nothing is timed by
        # how long the host takes to record the end event once the GPU's sleep is over, which a busy host
        # stretched past what the call's bytes need at the copy bandwidth once (H100, fourteenth session)
        assert "impossible" in failed_checks(cached)


# graph attacks and the checks that must flag them
GRAPH_ATTACKS = {
    "hostile-graph-counter": {"fresh-output", "serial-calls"},  # only the last call of a replay works
    "hostile-graph-shared": {"output"},   # every call returns the first call's output
    "hostile-graph-copy": {"fresh-output", "output"},  # ... or a copy of it
    "hostile-graph-batch": {"serial-calls"},    # the last call computes every call's output in one kernel
}


def test_graph_calls_that_skip_share_copy_or_overlap_their_work_are_invalid(hostile):
    """At a shape whose graph holds many calls, each call on inputs of its own. The first three are right
    wherever every call reads the same inputs; the batch is right on every call, and fast only because the
    calls of a replay run at once."""
    names = ["hostile-honest", *GRAPH_ATTACKS]
    options = RunOptions(rule=FixedCount(20), warmup=Warmup(3, 0.0), timeout=60.0, timing="graph")
    results = {r.subject: r for r in run_in_workers(options, plan(hostile, names, {"n": 1 << 14}, options), [HOSTILE])}
    for name in ("hostile-honest", "torch"):  # torch's eager host time sets how many calls its graph holds
        r = results[name]
        calls = r.measurement.calls_per_sample if r.measurement else 0
        assert r.status == "ok" and calls > (8 if name == "hostile-honest" else 1), (name, r.status, calls, r.error)
        assert any(c.name == "serial-calls" and c.verdict == "pass" for c in r.integrity), r.integrity
    honest = results["hostile-honest"].stats.median
    for name, checks in GRAPH_ATTACKS.items():
        r = results[name]
        caught = r.status == "INVALID" and failed_checks(r) & checks
        if name == "hostile-graph-batch" and not caught:
            # how much the batch gains depends on how many calls the host's speed puts in a graph (0.12 µs a
            # call at 48, 0.97 at 14, 1.64 at 10, against 1.41-1.45 honest): where it passes, it may not beat
            # an honest call by more than serial-calls' tolerance
            share, slack = integrity.SERIAL_SHARE, integrity.SERIAL_SLACK
            assert r.status == "ok" and r.stats.median >= share * honest - slack, (name, r.stats.median, honest)
            continue
        assert caught, (name, r.integrity)


# Each attack class (tests/hostile_kernels/hostile/spec.py) and the checks that must flag it: at least
# one of them, under every timer. None of them may reach a verdict from its own process.
ATTACKS = {
    "hostile-flag": {"fresh-output"},
    "hostile-memo": {"fresh-inputs", "hot-loop", "impossible"},
    "hostile-partial": {"fresh-inputs", "hot-loop", "impossible"},
    # its skipped work shows wherever a call on new values is read: the checked calls, the other kind's, the
    # stream-order probe's; which of them lands on a call it skipped is chance (session 31, cupti: the last two)
    "hostile-partial-skip": {"fresh-output", "fresh-inputs", "hot-loop", "impossible", "distribution", "stream-order"},
    "hostile-mutate": {"inputs"},
    "hostile-alias": {"output"},
    "hostile-strided": {"output"},
    "hostile-subclass": {"output"},
    "hostile-float64": {"output"},
    "hostile-uninit": {"determinism", "fresh-output"},
    "hostile-thread": {"threads"},
    "hostile-native-thread": {"threads"},        # threads the watch never recorded: read as Linux lists them
    "hostile-late-thread": {"threads"},          # ... started by the object the state guard's restore frees
    "hostile-take-threads": {"threads"},         # ... its own process told they are known: the judge reads them
    "hostile-helper": {"processes"},
    "hostile-plant": {"shapes"},      # its random shapes' binds leave a thread (that starts a process later)
    "hostile-patch-timer": {"process-state"},
    "hostile-swap-code": {"process-state"},      # the function objects kept, their code swapped (internals.py)
    "hostile-patch-worker": {"process-state"},
    "hostile-patch-library": {"process-state"},
    "hostile-signal-timer": {"process-state"},  # code left to run later without a thread (process_hooks.py)
    "hostile-finalizer": {"process-state"},     # ... at every garbage collection: its subject process is replaced
    "hostile-shape": {"shapes"},
}


# Under sync its call is host-bound (its Python sampling makes its figure about 3x the honest one on the H200), so
# its judged calls are timed by kernel time, where the 15 % it skips did not show (new 45-51 µs, same 48-50 µs:
# .ci/sessions/probe29_partial_skip.py). Only a read call on new values catches it there (the 4 checked ones, the
# other kind's, the repeat of the first values), each skipped with probability 1/2: it passes them all in about 1
# run of 64 (the twenty-ninth session's matrix under sync caught it on `distribution` alone: its 4 checked calls had
# all done their work). Passing them all, it is no faster than the honest subject: its skipping gained nothing.
READ_ONLY_UNDER_SYNC = {"hostile-partial-skip"}


@pytest.mark.parametrize("timing", ["sync", "events", "graph", "cupti"])
def test_every_attack_class_is_flagged_beside_an_honest_subject_and_the_baseline(hostile, timing):
    # hostile-skip-thread's threads, started as it is bound (it is then skipped), make the next subject open in a
    # fresh subject process: that one is caught for its own attack, as everywhere
    results = run(hostile, ["hostile-honest", "hostile-peek", "hostile-skip-thread", *ATTACKS], timing=timing)
    assert results["hostile-skip-thread"].skipped, results["hostile-skip-thread"]
    for name in ("hostile-honest", "torch"):
        r = results[name]
        assert r.status == "ok", (name, r.error, r.invalid_because)
    peek = results["hostile-peek"]  # nothing to find in its own process: its zeros fail the check
    assert peek.status == "FAIL" and peek.check.worst == pytest.approx(1.0), peek
    for name, flags in ATTACKS.items():
        r = results[name]
        caught = (r.status == "INVALID" and failed_checks(r) & flags) or r.status == "FAIL"
        # a binding that synchronises the host inside its call cannot be captured in a CUDA graph
        # (torch: "operation not permitted when stream is capturing"), nor share a tensor with another process
        caught = caught or (timing == "graph" and r.status == "ERROR" and "captur" in r.error)
        if name in READ_ONLY_UNDER_SYNC and timing == "sync" and not caught:
            # its skipped work hides in a host-bound call; it gains nothing there, or a read call catches it
            assert r.status == "INVALID" or r.stats.median >= results["hostile-honest"].stats.median, \
                (name, r.status, r.stats, r.invalid_because)
            continue
        assert caught, (name, r.status, r.error, r.invalid_because)


@pytest.mark.parametrize("kind", ["outliers", "pareto", "large"])
def test_a_kernel_tuned_to_its_default_inputs_fails_on_other_kinds(hostile, kind):
    results = run(hostile, ["hostile-honest", "hostile-tuned"], inputs=kind)
    assert results["hostile-tuned"].status == "FAIL"
    assert results["hostile-honest"].status == "ok" and results["torch"].status == "ok"


def test_an_impossible_figure_is_invalid(hostile):
    result = run(hostile, ["boastful-honest"])["boastful-honest"]
    assert result.status == "INVALID" and failed_checks(result) == {"impossible"}
    assert "exceeds the DRAM copy bandwidth" in result.invalid_because


def test_crashes_and_hangs_cost_only_their_own_subject(hostile):
    names = ["hostile-honest", "hostile-crash", "hostile-hang", "hostile-assert", "hostile-exit",
             "hostile-segfault", "hostile-persist-l2"]
    results = run(hostile, names, timeout=20.0)
    assert "illegal memory access" in results["hostile-crash"].error
    assert "timed out after 20 s" in results["hostile-hang"].error
    assert "device-side assert" in results["hostile-assert"].error
    assert "exited with code 3" in results["hostile-exit"].error
    assert "SIGSEGV" in results["hostile-segfault"].error
    for name in ("hostile-honest", "hostile-persist-l2", "torch"):  # before, between and after the failures
        r = results[name]
        assert r.status == "ok" and r.stats.n == 20, (name, r.error, r.invalid_because)


def test_state_left_behind_is_reset_and_invalidates_a_cold_run(hostile):
    results = run(hostile, ["hostile-persist-l2", "hostile-honest"], cold=True)
    persist, honest = results["hostile-persist-l2"], results["hostile-honest"]
    assert persist.status == "INVALID" and "persisting-L2" in persist.invalid_because
    assert honest.status == "ok" and honest.measurement.cache == "cold"
    state = next(c for c in honest.integrity if c.name == "process-state")
    assert state.detail == ""  # the next subject found the pristine state


def test_cli_run_of_honest_crash_hang_honest_baseline_keeps_every_result(tmp_path):
    path = tmp_path / "r.json"
    res = CliRunner().invoke(app, ["run", "--kernels-dir", str(HOSTILE), "-k", "hostile-honest", "-k", "hostile-crash",
                                   "-k", "hostile-hang", "-k", "hostile-persist-l2", "--timeout", "20",
                                   "--repeat", "10", "--json", str(path)])
    assert res.exit_code == 1, res.output  # the two failures
    assert "Traceback" not in res.output and "ERROR" in res.output
    doc = json.loads(path.read_text())
    status = {r["subject"]: r["status"] for r in doc["results"]}
    assert status == {"hostile-honest": "ok", "hostile-crash": "ERROR", "hostile-hang": "ERROR",
                      "hostile-persist-l2": "ok", "torch": "ok"}


def test_no_integrity_says_the_figures_are_unverified(hostile):
    res = CliRunner().invoke(app, ["run", "--kernels-dir", str(HOSTILE), "-k", "hostile-cached", "--repeat", "5",
                                   "--no-integrity"])
    assert res.exit_code == 0, res.output
    assert "integrity checks SKIPPED" in res.output


def test_memory_a_subject_hoards_between_calls_is_counted(hostile):
    """hostile-hoard allocates nothing new in a warm call but keeps 64 MiB from its first: its peak
    memory counts it; the honest variant's is its output (n floats)."""
    results = run(hostile, ["hostile-honest", "hostile-hoard"])
    honest, hoard = results["hostile-honest"], results["hostile-hoard"]
    for r in (honest, hoard):
        assert r.status == "ok", (r.subject, r.error, r.invalid_because)
    output = SHAPE["n"] * 4
    assert output <= honest.peak_memory < output + (1 << 20)
    assert hoard.peak_memory >= output + (64 << 20)
