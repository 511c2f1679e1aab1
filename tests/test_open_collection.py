"""What the subject process collects as it opens a subject: only the young generations when the judge saw
the last subject finish (its full collection leaves only young garbage), everything when it did not (a
subject that ended in an error has not been collected: its cycles may hold GPU memory that would count in the
next subject's baseline for peak memory)."""

import pytest

from cudabench.measure import judge as judge_module
from cudabench.measure.judged_calls import SubjectError
from cudabench.spec.registry import discover
from test_judge import HOSTILE, judge_one, make_judge


@pytest.fixture(scope="module")
def registry():
    return discover([HOSTILE])


def test_after_a_subject_that_did_not_finish_the_next_open_collects_everything(registry, monkeypatch):
    collects, failing = [], []
    ask_while, timed = judge_module.Session.ask_while, judge_module.Session.timed

    def logged(self, request, work):
        if request["op"] == "open" and self.settings.time:
            collects.append(request["collect"])
        return ask_while(self, request, work)

    def fails_when_told(self, result, reference):
        if failing:
            raise SubjectError("its call raised")
        return timed(self, result, reference)

    # patched before the judge is made: the state guard of the subject process, which runs in this process
    # here, takes cudabench's functions as they are then, and undoes any later change
    monkeypatch.setattr(judge_module.Session, "ask_while", logged)
    monkeypatch.setattr(judge_module.Session, "timed", fails_when_told)
    judge = make_judge(registry)
    assert judge_one(registry, "hostile-honest", judge=judge).status == "ok"
    assert judge_one(registry, "hostile-honest", judge=judge).status == "ok"
    failing.append(True)
    assert judge_one(registry, "hostile-honest", judge=judge).status == "ERROR"
    failing.clear()
    assert judge_one(registry, "hostile-honest", judge=judge).status == "ok"
    assert judge_one(registry, "hostile-honest", judge=judge).status == "ok"
    assert collects == ["young", "young", "young", "full", "young"]
