"""The judge on low-precision attention, on the CPU (tests/rounding_kernels/roundattn): an honest kernel
that rounds P and dS as flash kernels do is not made INVALID by an outliers draw that this rounding alone
takes past the tolerance (the H100 did that to attn-flash3 once), and a kernel tuned to the family's own
inputs is still caught on a draw the rule keeps."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from cudabench.engine.subject_link import SubjectLink
from cudabench.engine.subject_worker import SubjectHandler
from cudabench.engine.workers import InlineWorker
from cudabench.measure import judged_calls, kinds
from cudabench.measure.judge import Judge
from cudabench.measure.settings import Settings
from cudabench.results.records.model import Case
from cudabench.spec.registry import discover
from test_judge import WorkTimer

ROUNDING = Path(__file__).resolve().parent / "rounding_kernels"
SHAPE = (("B", 1), ("H", 2), ("N", 128), ("D", 64), ("causal", 1))
# outliers draws at SHAPE in bfloat16 (fwd+bwd): the rounded math errs 1.8e-2 on the first, 5.4e-3 on the
# second, against the tolerance 1.57e-2 (test_judge.py's rounded-reference test draws the same way)
PAST_TOLERANCE, WELL_INSIDE = 9, 0


@pytest.fixture(scope="module")
def registry():
    return discover([ROUNDING])


def judged(registry, name, kind_seed, monkeypatch):
    """`name` judged in bfloat16 fwd+bwd, its one other-kind call drawn from outliers with `kind_seed`."""
    monkeypatch.setattr(judged_calls, "other_input_kinds", lambda family, case: ["outliers"])
    monkeypatch.setattr(judged_calls, "secrets", SimpleNamespace(randbits=lambda bits: kind_seed))
    ext = SimpleNamespace(work=0)
    handler = SubjectHandler("cpu", timer_factory=lambda timing: WorkTimer(ext), modules={"roundattn": ext})
    link = SubjectLink(lambda: InlineWorker(handler), {"op": "hello", "kernels_dirs": [str(ROUNDING)]})
    judge = Judge(registry, link, device="cpu")
    case = Case("roundattn", SHAPE, "fwdbwd", dtype="bfloat16")
    settings = Settings(rule={"kind": "repeat", "count": 20}, warmup_calls=2, warmup_seconds=0.0, fuzz=0, seed=7)
    return judge.run(registry.family("roundattn"), case, name, "variant", settings)


def distribution(result):
    return next(c for c in result.integrity if c.name == "distribution")


def test_an_honest_kernel_keeps_its_figure_where_rounding_alone_misses_the_tolerance(registry, monkeypatch):
    r = judged(registry, "roundattn-honest", PAST_TOLERANCE, monkeypatch)
    assert r.status == "ok", [c for c in r.integrity if c.failed]
    assert distribution(r).verdict == "not run" and "honest kernel" in distribution(r).detail


def test_without_the_rule_the_same_draw_makes_the_honest_kernel_invalid(registry, monkeypatch):
    monkeypatch.setattr(kinds, "rounding_can_pass", lambda *args: True)
    r = judged(registry, "roundattn-honest", PAST_TOLERANCE, monkeypatch)
    assert r.status == "INVALID" and distribution(r).verdict == "fail", r.integrity


def test_a_draw_the_rule_keeps_passes_the_honest_kernel_and_catches_the_tuned_one(registry, monkeypatch):
    honest = judged(registry, "roundattn-honest", WELL_INSIDE, monkeypatch)
    tuned = judged(registry, "roundattn-tuned", WELL_INSIDE, monkeypatch)
    assert honest.status == "ok" and distribution(honest).verdict == "pass", honest.integrity
    assert tuned.status == "INVALID" and distribution(tuned).verdict == "fail", tuned.integrity
    assert "outliers" in distribution(tuned).detail
