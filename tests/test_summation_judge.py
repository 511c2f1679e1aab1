"""The judge on sums of equal terms, on the CPU (tests/rounding_kernels/seqsum): an honest kernel that adds
its terms one by one in float32 (as timex-v1..v5 do) is not made INVALID by a constant draw, on which such a
sum errs past the family's tolerance (an honest timex-v4 at T = 1024 was, once in 25 sweeps on the H100): the
call is held to the family's reduction length in float32 roundoffs. A kernel wrong on ties is still caught,
and families that give no reduction length keep their tolerance."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from cudabench.measure import judged_calls, kinds
from cudabench.measure.check import relative_error
from cudabench.measure.settings import Settings
from cudabench.results.records.model import Case
from cudabench.spec.family import UNIT_ROUNDOFF
from cudabench.spec.registry import discover
from runs import inline_judge
from test_judge import WorkTimer

ROUNDING = Path(__file__).resolve().parent / "rounding_kernels"
SHAPE = (("B", 2), ("T", 2048))
KIND_SEED = 3


@pytest.fixture(scope="module")
def registry():
    return discover([ROUNDING])


def judged(registry, name, monkeypatch, inputs="normal", kind="constant"):
    """`name` judged in float32 with its one other-kind call on `kind`, drawn from KIND_SEED."""
    monkeypatch.setattr(judged_calls, "other_input_kinds", lambda family, case: [kind])
    monkeypatch.setattr(judged_calls, "secrets", SimpleNamespace(randbits=lambda bits: KIND_SEED))
    ext = SimpleNamespace(work=0)
    judge = inline_judge(registry, ROUNDING, {"seqsum": ext}, lambda timing: WorkTimer(ext))
    settings = Settings(rule={"kind": "repeat", "count": 20}, warmup_calls=2, warmup_seconds=0.0, fuzz=0, seed=7)
    return judge.run(registry.family("seqsum"), Case("seqsum", SHAPE, "fwd", inputs=inputs), name, "variant",
                     settings)


def distribution(result):
    return next(c for c in result.integrity if c.name == "distribution")


def test_the_honest_sequential_sum_misses_the_family_s_tolerance_on_the_draw(registry):
    """The premise: on this constant draw the one-by-one float32 sum errs past 2e-6, within T·u."""
    family = registry.family("seqsum")
    case = Case("seqsum", SHAPE, "fwd", inputs="constant")
    ext = SimpleNamespace(work=0)
    judge = inline_judge(registry, ROUNDING, {"seqsum": ext}, lambda timing: WorkTimer(ext))
    draw = judge.draw(family, case, KIND_SEED, None)
    got = family.variant("seqsum-honest").bind(ext)(**draw.inputs)
    error = relative_error(got, judge.reference(family, case, draw, keep=False)["out"])
    assert family.tolerance < error < 2048 * UNIT_ROUNDOFF["float32"], error


def test_an_honest_sequential_sum_passes_on_equal_terms(registry, monkeypatch):
    r = judged(registry, "seqsum-honest", monkeypatch)
    assert r.status == "ok", [c for c in r.integrity if c.failed]
    assert distribution(r).verdict == "pass", distribution(r)
    assert "sum of equal terms" in distribution(r).detail, distribution(r)


def test_without_the_allowance_the_same_draw_makes_it_invalid(registry, monkeypatch):
    monkeypatch.setattr(kinds, "held_to", lambda family, case: family.tolerance_for(case.dtype))
    r = judged(registry, "seqsum-honest", monkeypatch)
    assert r.status == "INVALID" and distribution(r).verdict == "fail", r.integrity
    assert "constant" in distribution(r).detail


def test_a_kernel_wrong_on_ties_is_caught_within_the_allowance(registry, monkeypatch):
    r = judged(registry, "seqsum-tuned", monkeypatch)
    assert r.status == "INVALID" and distribution(r).verdict == "fail", r.integrity
    assert "sum of equal terms" in distribution(r).detail


def test_a_case_of_constant_inputs_holds_its_check_to_the_allowance(registry, monkeypatch):
    """`--inputs constant`: the first check and the checked judged calls are held to T·u too."""
    r = judged(registry, "seqsum-honest", monkeypatch, inputs="constant", kind="normal")
    assert r.status == "ok", (r.skipped, [c for c in r.integrity if c.failed])
    assert r.check.tolerance == pytest.approx(2048 * UNIT_ROUNDOFF["float32"]), r.check
    tuned = judged(registry, "seqsum-tuned", monkeypatch, inputs="constant", kind="normal")
    assert tuned.status == "FAIL" and "failed the check" in tuned.skipped, (tuned.status, tuned.skipped)


@pytest.mark.parametrize("inputs", ["normal", "outliers", "zeros"])
def test_other_kinds_keep_the_family_s_tolerance(registry, inputs):
    case = Case("seqsum", SHAPE, "fwd", inputs=inputs)
    assert kinds.held_to(registry.family("seqsum"), case) == 2e-6


def test_the_shipped_families_give_their_reduction_lengths():
    shipped = discover()
    timex, matmul = shipped.family("timex"), shipped.family("matmul")
    fwd = Case("timex", (("B", 32), ("C", 768), ("T", 1024)), "fwd", inputs="constant")
    assert kinds.held_to(timex, fwd) == pytest.approx(1024 * UNIT_ROUNDOFF["float32"])
    bwd = Case("timex", (("B", 32), ("C", 768), ("T", 1024)), "bwd", inputs="constant")
    assert kinds.held_to(timex, bwd) == pytest.approx(32 * 1024 * UNIT_ROUNDOFF["float32"])  # gw: batch and time
    short = Case("matmul", (("M", 64), ("N", 64), ("K", 64)), "fwd", inputs="constant")
    assert kinds.held_to(matmul, short) == matmul.tolerance  # 64 roundoffs are below it
    assert kinds.held_to(shipped.family("add2"), Case("add2", (("n", 1 << 20),), "fwd", inputs="constant")) == 1e-6
