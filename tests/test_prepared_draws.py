"""The first round of judged calls draws its checked inputs and their fp64 references while the subject
process opens the subject (JudgedCalls.prepare_calls), before any call: the same draws, made earlier."""

import pytest

from cudabench.measure import judge as judge_module
from cudabench.measure import judged_calls
from cudabench.spec.registry import discover
from test_judge import HOSTILE, judge_one


@pytest.fixture(scope="module")
def registry():
    return discover([HOSTILE])


def record(monkeypatch):
    """Each request the judge sends the subject process and each fp64 reference it computes, in order."""
    log = []
    ask, ask_while, reference = judge_module.Session.ask, judge_module.Session.ask_while, judge_module.Judge.reference

    def logged_ask(self, request, *a, **k):
        log.append(request["op"])
        return ask(self, request, *a, **k)

    def logged_ask_while(self, request, work):
        log.append(request["op"])
        return ask_while(self, request, work)

    def logged_reference(self, family, case, draw, keep):
        log.append("reference" if (case.key, draw.seed) not in self._references else "kept reference")
        return reference(self, family, case, draw, keep)

    monkeypatch.setattr(judge_module.Session, "ask", logged_ask)
    monkeypatch.setattr(judge_module.Session, "ask_while", logged_ask_while)
    monkeypatch.setattr(judge_module.Judge, "reference", logged_reference)
    return log


def test_the_first_round_s_references_are_made_before_the_subject_s_first_call(registry, monkeypatch):
    log = record(monkeypatch)
    r = judge_one(registry, "hostile-honest")
    assert r.status == "ok", r.integrity
    log = log[:log.index("finish")]  # this subject's requests (its random shapes are subjects of their own)
    made = [i for i, step in enumerate(log) if step == "reference"]
    # the first draw's before the subject opens; the other kind's and the CHECKED_DRAWS checked ones while it
    # opens: all before the check's call, and none in the round of judged calls after the hot loop
    assert len(made) >= 2 + judged_calls.CHECKED_DRAWS, log
    assert made[0] < log.index("open") < made[1] and made[-1] < log.index("call"), log
    assert "reference" not in log[log.index("hot"):], log
    checked = {c.name: c for c in r.integrity}["fresh-output"]
    assert checked.verdict == "pass" and f"{judged_calls.CHECKED_DRAWS + 1} timed calls checked" in checked.detail


def test_draws_that_fail_ahead_are_made_by_the_round_as_before(registry, monkeypatch):
    calls = {"n": 0}
    checked_draw = judged_calls.JudgedCalls._checked_draw

    def fails_once(self, draw):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("a reference that failed ahead")
        return checked_draw(self, draw)

    monkeypatch.setattr(judged_calls.JudgedCalls, "_checked_draw", fails_once)
    log = record(monkeypatch)
    r = judge_one(registry, "hostile-honest")
    assert r.status == "ok", r.integrity
    round_of_calls = log[log.index("hot"):log.index("finish")]
    assert round_of_calls.count("reference") >= judged_calls.CHECKED_DRAWS, log  # the round made its own


def test_a_cache_is_still_caught_with_the_draws_made_ahead(registry):
    r = judge_one(registry, "hostile-memo")
    assert r.status == "INVALID"
    assert any(c.failed for c in r.integrity), r.integrity


def test_a_subject_that_stops_before_its_judged_calls_leaves_no_prepared_draws_held(registry, monkeypatch):
    """The draws made while the subject opens are dropped with the subject's other tensors when it fails its
    check (the judge then hands its cached memory back)."""
    sessions = []
    release = judge_module.Session.release

    def kept(self):
        release(self)
        sessions.append(self)

    monkeypatch.setattr(judge_module.Session, "release", kept)
    r = judge_one(registry, "hostile-alias")  # computes in place: it is not timed
    assert r.status != "ok" and r.measurement is None
    assert sessions and all(s.prepared is None for s in sessions)
