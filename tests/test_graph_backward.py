"""A backward timed under graph timing, on the CPU: a graph replays the captured backward on the stored
forward it was captured with (attention's O and log-sum-exp, timex-fft's spectra), which is stale once the
judge writes new values. The graph timer captures the forward in a graph of its own and the subject process
replays it before each judged call, so the replays that are timed are also the calls that are judged, on a
forward of their own values. The replays are modelled by a timer that runs what it was prepared with,
whatever it is handed later."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from cudabench.measure.settings import Settings
from cudabench.results.records.model import Case
from cudabench.spec.registry import discover
from runs import inline_judge
from test_judge import WorkTimer

ROUNDING = Path(__file__).resolve().parent / "rounding_kernels"
# bfloat16: the rounded math's backward reads the stored output (rowsum(dO∘O)), as flash kernels do
SHAPE = (("B", 1), ("H", 2), ("N", 64), ("D", 32), ("causal", 1))


class ReplayTimer(WorkTimer):
    """A CUDA graph's semantics: `samples` runs the call `prepare` captured, not the one it is given, after
    the captured `before` unless `refresh` just ran it (a real graph rewrites the same memory, here the
    same closure). `refreshes=False`: the forward is never made again."""

    name = "graph"
    before = None
    refreshes = True
    refreshed = False

    def prepare(self, call, estimate):
        self.captured, self.captured_before = call, self.before
        self.graph = SimpleNamespace(replay=call)  # what the subject process replays to warm the GPU

    def refresh(self):
        if self.refreshes and self.captured_before is not None:
            self.captured_before()
            self.refreshed = True

    def samples(self, call, count, before_each=None, keep=False):
        out = []
        for _ in range(count):
            if self.refreshes and self.captured_before is not None and not self.refreshed:
                self.captured_before()
            self.refreshed = False
            out += super().samples(self.captured, 1, before_each, keep)
        return out


@pytest.fixture(scope="module")
def registry():
    return discover([ROUNDING])


def judged_backward(registry, refreshes=True):
    ext = SimpleNamespace(work=0)

    def timer(timing):
        made = (ReplayTimer if timing == "graph" else WorkTimer)(ext)
        made.refreshes = refreshes
        return made

    case = Case("roundattn", SHAPE, "bwd", dtype="bfloat16")
    settings = Settings(rule={"kind": "repeat", "count": 10}, warmup_calls=2, warmup_seconds=0.0, fuzz=0,
                        timing="graph")
    return inline_judge(registry, ROUNDING, {"roundattn": ext}, timer).run(
        registry.family("roundattn"), case, "roundattn-honest", "variant", settings)


def verdict(result, name):
    return next(c for c in result.integrity if c.name == name)


def test_an_honest_backward_under_graph_timing_is_judged_on_a_forward_of_its_own_values(registry):
    r = judged_backward(registry)
    assert r.status == "ok", [c for c in r.integrity if c.failed]
    for name in ("fresh-output", "distribution", "hot-loop", "fresh-inputs"):
        assert verdict(r, name).verdict == "pass", verdict(r, name)


def test_replays_of_the_backward_alone_would_read_a_stale_forward(registry):
    """The test can fail: without the forward made again, the judged replays are wrong on new values."""
    r = judged_backward(registry, refreshes=False)
    assert r.status == "INVALID" and verdict(r, "fresh-output").verdict == "fail", r.integrity
