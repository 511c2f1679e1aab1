"""The judge and the blind subject process on the CPU, against the hostile test bed's Python-level
attacks: each must be flagged with its reason, and the honest subject and the baseline must stay ok.
On the CPU the subject runs in the judge's process (so the attacks that search their own process for
the reference are GPU tests: tests/gpu/test_integrity_gpu.py); everything else is the same code.

The hostile family's bindings run unchanged over a stand-in extension that computes y = 2x + 1 in
PyTorch on the CPU and counts the elements it computed. The timer reports that count (1 ns per
element), so a figure that depends on its inputs staying the same shows without a wall clock."""

from pathlib import Path

import pytest
import torch

from cudabench.engine.subject_link import SubjectLink
from cudabench.engine.subject_worker import SubjectHandler
from cudabench.engine.workers import InlineWorker
from cudabench.measure import judge as judge_module
from cudabench.measure.judge import Judge
from cudabench.measure.settings import Settings
from cudabench.results.model import Case
from cudabench.spec.registry import discover

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


def judge_one(registry, name, role="variant", inputs="uniform", **settings):
    ext = StandIn()
    handler = SubjectHandler("cpu", timer_factory=lambda timing: WorkTimer(ext), modules={"hostile": ext})
    link = SubjectLink(lambda: InlineWorker(handler), {"op": "hello", "kernels_dirs": [str(HOSTILE)]})
    judge = Judge(registry, link, device="cpu")
    case = Case("hostile", (("n", N),), inputs=inputs)
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
    for check in ("fresh-output", "fresh-inputs", "determinism", "stream-order", "process-state", "threads"):
        assert verdicts[check] == "pass", (check, r.integrity)


def test_work_done_only_on_calls_it_takes_for_checked_is_caught_on_random_timed_calls(registry, monkeypatch):
    # hostile-flag also sniffs for NaN in its fresh output; the host's malloc may hand it memory
    # another test NaN-filled, so here every new draw is checked (on a GPU two are: see
    # docs/benchmarks/h100-integrity.md)
    monkeypatch.setattr(judge_module, "CHECKED_DRAWS", judge_module.NEW_DRAWS)
    r = judge_one(registry, "hostile-flag")
    assert r.status == "INVALID"
    assert "fresh-output" in failed(r) and "chosen at random among the timed calls" in failed(r)["fresh-output"]


@pytest.mark.parametrize("name", ["hostile-memo", "hostile-partial"])
def test_a_figure_that_depends_on_unchanged_inputs_in_full_or_in_part_is_invalid(registry, name):
    r = judge_one(registry, name)
    assert r.status == "INVALID"
    # new values against the same values rewritten, or the hot loop against the latter: which one
    # shows depends on the judge's secret order (a cache by content misses after every new draw)
    assert {"fresh-inputs", "hot-loop"} & set(failed(r)), r.integrity
    assert "fresh-output" not in failed(r)  # its outputs are right: only its hot figure lies


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


def test_a_kernel_written_for_the_timed_shape_fails_at_random_shapes_within_its_constraints(registry):
    r = judge_one(registry, "hostile-shape", fuzz=8)  # right at n = 2^20; 8 shapes: some are ragged
    assert r.status == "INVALID" and "wrong at a random shape within its constraints" in failed(r)["shapes"]
    honest = judge_one(registry, "hostile-honest", fuzz=8)
    shapes = next(c for c in honest.integrity if c.name == "shapes")
    assert shapes.verdict == "pass" and shapes.detail.count("n=") == 8


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
    assert len(calls) == 1 + judge_module.FRESH_CALLS + fuzzed and all(r == {"op": "call"} for r in calls)
    text = repr(seen)
    for word in ("seed\": 1", "reference", "tolerance", "checked"):
        assert word not in text


def test_the_hot_loop_check_is_not_run_for_a_host_bound_call():
    """A call whose figure is mostly the host's launching is slower after any pause (an honest cuDNN
    conv1d took 109 µs in the hot loop, 227 µs in judged calls): not comparable, so not run."""
    from cudabench.results.stats import summarize

    session = judge_module.Session.__new__(judge_module.Session)
    session.settings = Settings()
    hot = Case("hostile", (("n", 1),))
    from cudabench.results.model import Result

    result = Result(hot, "s", "variant", stats=summarize([109e-6] * 20))
    bound = session._hot_loop([227e-6] * 8, result, busy=[10e-6] * 5)
    assert bound.verdict == "not run" and "host-bound" in bound.detail
    gpu = session._hot_loop([227e-6] * 8, result, busy=[100e-6] * 5)
    assert gpu.verdict == "fail"


@pytest.mark.parametrize("kind", ["outliers", "pareto"])
def test_a_kernel_tuned_to_its_default_inputs_fails_on_other_kinds(registry, kind):
    assert judge_one(registry, "hostile-tuned").status == "ok"
    assert judge_one(registry, "hostile-tuned", inputs=kind).status == "FAIL"


@pytest.mark.parametrize("kind", ["outliers", "pareto", "constant", "zeros"])
def test_every_family_takes_the_generic_input_kinds_and_honest_ops_pass_them(registry, kind):
    r = judge_one(registry, "hostile-honest", inputs=kind)
    assert r.status == "ok", (r.skipped, r.error, failed(r))
    assert r.case.key().endswith(f"{kind}]/fwd")  # recorded: the kind is part of the case


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
