"""The judge on low-precision attention, on the CPU (tests/rounding_kernels/roundattn): an honest kernel
that rounds P and dS as flash kernels do is not made INVALID by an outliers draw that this rounding alone
takes past the tolerance (the H100 did that to attn-flash3 once): the call is held to what the rounding
allows on its draw. A kernel tuned to the family's own inputs is still caught, and outliers stay in play."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from cudabench.measure import judged_calls, kinds
from cudabench.measure.settings import Settings
from cudabench.results.records.model import Case
from cudabench.spec.registry import discover
from runs import inline_judge
from test_judge import WorkTimer

ROUNDING = Path(__file__).resolve().parent / "rounding_kernels"
SHAPE = (("B", 1), ("H", 2), ("N", 128), ("D", 64), ("causal", 1))
# outliers draws at SHAPE in bfloat16 (fwd+bwd): the rounded math errs 1.8e-2 on the first, 5.4e-3 on the
# second, against the tolerance 1.57e-2 (test_judge.py's rounded-reference test draws the same way)
PAST_TOLERANCE, WELL_INSIDE = 9, 0
ALL_OTHER_KINDS = judged_calls.other_input_kinds


@pytest.fixture(scope="module")
def registry():
    return discover([ROUNDING])


def make_judge(registry, kind_seed, monkeypatch):
    """A judge whose one other-kind call per subject is an outliers draw from `kind_seed`."""
    monkeypatch.setattr(judged_calls, "other_input_kinds", lambda family, case: ["outliers"])
    monkeypatch.setattr(judged_calls, "secrets", SimpleNamespace(randbits=lambda bits: kind_seed))
    ext = SimpleNamespace(work=0)
    return inline_judge(registry, ROUNDING, {"roundattn": ext}, lambda timing: WorkTimer(ext))


def judged(registry, judge, name):
    """`name` judged in bfloat16 fwd+bwd."""
    case = Case("roundattn", SHAPE, "fwdbwd", dtype="bfloat16")
    settings = Settings(rule={"kind": "repeat", "count": 20}, warmup_calls=2, warmup_seconds=0.0, fuzz=0, seed=7)
    return judge.run(registry.family("roundattn"), case, name, "variant", settings)


def distribution(result):
    return next(c for c in result.integrity if c.name == "distribution")


def test_an_honest_kernel_passes_where_rounding_alone_misses_the_tolerance(registry, monkeypatch):
    judge = make_judge(registry, PAST_TOLERANCE, monkeypatch)
    r = judged(registry, judge, "roundattn-honest")
    assert r.status == "ok", [c for c in r.integrity if c.failed]
    assert distribution(r).verdict == "pass" and "widened" in distribution(r).detail, distribution(r)
    # the kind stays in play for the case's next subject (a rejected draw is not the kind's fault)
    again = judged(registry, judge, "roundattn-honest")
    assert distribution(again).verdict == "pass", distribution(again)


def test_without_the_allowance_the_same_draw_makes_the_honest_kernel_invalid(registry, monkeypatch):
    monkeypatch.setattr(kinds, "rounding_allowance", lambda family, case, *args: family.tolerance_for(case.dtype))
    r = judged(registry, make_judge(registry, PAST_TOLERANCE, monkeypatch), "roundattn-honest")
    assert r.status == "INVALID" and distribution(r).verdict == "fail", r.integrity


@pytest.mark.parametrize("kind_seed", [PAST_TOLERANCE, WELL_INSIDE])
def test_a_kernel_tuned_to_the_family_s_own_inputs_is_caught_widened_or_not(registry, monkeypatch, kind_seed):
    tuned = judged(registry, make_judge(registry, kind_seed, monkeypatch), "roundattn-tuned")
    assert tuned.status == "INVALID" and distribution(tuned).verdict == "fail", tuned.integrity
    assert "outliers" in distribution(tuned).detail


def test_a_draw_past_the_rounding_cap_is_drawn_again(registry, monkeypatch):
    """A draw the rounded math errs on by more than ROUNDING_CAP tolerances is replaced by another of the
    same kind; after KIND_DRAWS such draws the kind is left for that subject only. (Patched before the
    judge starts: on the CPU the subject shares the judge's process, whose state guard puts back any
    cudabench function patched later.)"""
    real = kinds.rounding_allowance
    past_cap = [2]  # draws still to be reported past the cap; None: every draw

    def allowance(*args):
        if past_cap[0] is None or past_cap[0] > 0:
            past_cap[0] = None if past_cap[0] is None else past_cap[0] - 1
            return float("inf")
        return real(*args)

    monkeypatch.setattr(kinds, "rounding_allowance", allowance)
    judge = make_judge(registry, WELL_INSIDE, monkeypatch)
    assert distribution(judged(registry, judge, "roundattn-honest")).verdict == "pass"  # its third draw
    past_cap[0] = None
    r = judged(registry, judge, "roundattn-honest")
    assert distribution(r).verdict == "not run" and r.status == "ok", distribution(r)
    past_cap[0] = 0
    assert distribution(judged(registry, judge, "roundattn-honest")).verdict == "pass"


def judged_on_outliers(registry, judge, name, seed=PAST_TOLERANCE):
    """`name` judged in bfloat16 fwd+bwd on a case of outliers inputs (`--inputs outliers`): its check draw
    comes from the seed (9: the rounded math errs 1.8e-2 on it, past the tolerance 1.57e-2)."""
    case = Case("roundattn", SHAPE, "fwdbwd", dtype="bfloat16", inputs="outliers")
    settings = Settings(rule={"kind": "repeat", "count": 20}, warmup_calls=2, warmup_seconds=0.0, fuzz=0, seed=seed)
    return judge.run(registry.family("roundattn"), case, name, "variant", settings)


def test_a_case_of_another_kind_holds_the_check_to_what_rounding_allows_on_its_draw(registry, monkeypatch):
    """`--inputs outliers` in bfloat16: the check and the checked judged calls are held to what the rounded
    math errs on each draw, as the other-kind judged call is; the tuned kernel still fails."""
    honest = judged_on_outliers(registry, make_judge(registry, WELL_INSIDE, monkeypatch), "roundattn-honest")
    assert honest.status == "ok", (honest.skipped, [c for c in honest.integrity if c.failed])
    assert honest.check.tolerance > 2 * 1.57e-2, honest.check  # twice the rounded math's 1.8e-2
    tuned = judged_on_outliers(registry, make_judge(registry, WELL_INSIDE, monkeypatch), "roundattn-tuned")
    assert tuned.status == "FAIL" and "failed the check" in tuned.skipped, (tuned.status, tuned.skipped)


def test_without_it_the_honest_kernel_fails_its_check_on_that_draw(registry, monkeypatch):
    monkeypatch.setattr(kinds, "rounding_allowance", lambda family, case, *args: family.tolerance_for(case.dtype))
    honest = judged_on_outliers(registry, make_judge(registry, WELL_INSIDE, monkeypatch), "roundattn-honest")
    assert honest.status == "FAIL" and "failed the check" in honest.skipped, (honest.status, honest.skipped)


def test_each_checked_judged_call_is_held_to_what_rounding_allows_on_its_own_draw(registry, monkeypatch):
    """The checked judged calls of an outliers case draw seed 9 here, past the tolerance by rounding alone: each
    is held to its own draw's allowance. Held to the check draw's instead (seed 0's, the family's tolerance),
    the honest kernel's fresh-output fails, so the per-draw allowance is what keeps it ok."""
    from cudabench.measure import judge as judge_module

    honest = judged_on_outliers(registry, make_judge(registry, PAST_TOLERANCE, monkeypatch), "roundattn-honest",
                                seed=WELL_INSIDE)
    assert honest.status == "ok", [c for c in honest.integrity if c.failed]
    real = judge_module.Session.draw_tolerance
    monkeypatch.setattr(judge_module.Session, "draw_tolerance",
                        lambda self, draw, reference: real(self, draw, reference) if draw is self.first
                        else self.tolerance)
    once = judged_on_outliers(registry, make_judge(registry, PAST_TOLERANCE, monkeypatch), "roundattn-honest",
                              seed=WELL_INSIDE)
    assert once.status == "INVALID", once.integrity
    assert next(c for c in once.integrity if c.name == "fresh-output").verdict == "fail", once.integrity


def test_on_a_widened_case_the_other_kind_call_is_the_family_s_first_kind_at_its_tolerance(registry, monkeypatch):
    """Where every draw of the case's own kind may be widened (up to 4.7x here), a kernel 3 % off everywhere
    passes its check on seed 9's outliers draw; its one call on the family's first kind, held to the family's
    tolerance, catches it."""
    judge = make_judge(registry, WELL_INSIDE, monkeypatch)
    monkeypatch.setattr(judged_calls, "other_input_kinds", ALL_OTHER_KINDS)
    sloppy = judged_on_outliers(registry, judge, "roundattn-sloppy")
    assert sloppy.check.passed, sloppy.check
    assert sloppy.status == "INVALID" and distribution(sloppy).verdict == "fail", sloppy.integrity
    assert "uniform" in distribution(sloppy).detail


def test_a_case_whose_own_draw_no_honest_kernel_can_be_held_to_is_skipped_with_the_reason(registry, monkeypatch):
    monkeypatch.setattr(kinds, "rounding_allowance", lambda *args: float("inf"))
    r = judged_on_outliers(registry, make_judge(registry, WELL_INSIDE, monkeypatch), "roundattn-honest")
    assert r.status == "SKIP" and "try another --seed" in r.skipped, (r.status, r.skipped)
