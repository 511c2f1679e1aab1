"""The `bwd` direction on the CPU (tests/backward_kernels/peek): the judge writes a judged call's upstream
gradient only after the subject process has made the stored forward, so a forward that finds the gradient
in its own process and makes the backward's work there, untimed, has the previous call's gradient and is
wrong on new values. Before, it was right everywhere and its timed backward did nothing."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from cudabench.measure import judge as judge_module
from cudabench.measure.settings import Settings
from cudabench.results.records.model import Case
from cudabench.spec.registry import discover
from runs import inline_judge
from test_judge import WorkTimer

PEEK = Path(__file__).resolve().parent / "backward_kernels"


@pytest.fixture(scope="module")
def registry():
    return discover([PEEK])


def judged(registry, name):
    ext = SimpleNamespace(work=0)
    judge = inline_judge(registry, PEEK, {"peek": ext}, lambda timing: WorkTimer(ext))
    settings = Settings(rule={"kind": "repeat", "count": 10}, warmup_calls=2, warmup_seconds=0.0, fuzz=0)
    return judge.run(registry.family("peek"), Case("peek", (("n", 1 << 16),), "bwd"), name, "variant", settings)


def failed(result):
    return {c.name for c in result.integrity if c.failed}


def test_an_honest_backward_stays_ok(registry):
    r = judged(registry, "peek-honest")
    assert r.status == "ok", [c for c in r.integrity if c.failed]


def test_a_backward_made_in_its_forward_is_wrong_on_new_gradients(registry):
    r = judged(registry, "peek-ahead")
    assert r.status == "INVALID" and "fresh-output" in failed(r), r.integrity


def test_with_the_gradient_written_before_the_forward_it_would_pass(registry, monkeypatch):
    """The test can fail: write inputs and gradient together, then make the forward, as before."""
    real = judge_module.Session.write

    def together(self, draw, inputs=True, grad=True):
        real(self, draw)

    monkeypatch.setattr(judge_module.Session, "write", together)
    r = judged(registry, "peek-ahead")
    assert r.status == "ok" and r.stats.median < 2e-6, (r.status, failed(r))


def test_a_stream_order_probe_whose_hold_ran_out_before_its_call_was_queued_is_made_again_longer(
        registry, monkeypatch):
    """The probe writes the first inputs back, then makes the stored forward and calls the backward: the
    stream must stay held until both are queued. A forward that takes 20 ms on the host outlasts the first
    hold (1 ms): the judge asks again with a hold of at least four times that, and the probe stands."""
    from cudabench.measure import stream_order

    asked = []
    real = stream_order.order_hold
    monkeypatch.setattr(stream_order, "order_hold", lambda median, hold=None: asked.append(hold) or real(median, hold))
    ext = SimpleNamespace(work=0, forward_seconds=0.02)
    judge = inline_judge(registry, PEEK, {"peek": ext}, lambda timing: WorkTimer(ext))
    settings = Settings(rule={"kind": "repeat", "count": 3}, warmup_calls=1, warmup_seconds=0.0, fuzz=0)
    r = judge.run(registry.family("peek"), Case("peek", (("n", 1 << 10),), "bwd"), "peek-honest", "variant", settings)
    assert r.status == "ok", [c for c in r.integrity if c.failed]
    assert len(asked) == 2 and asked[0] is None and asked[1] >= 4 * 0.02
    order = next(c for c in r.integrity if c.name == "stream-order")
    assert order.verdict == "pass" and "twice" not in order.detail
