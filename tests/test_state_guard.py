"""The state guard's quick check (cudabench.measure.unchanged) in front of its full walk: after a
subject that changed nothing the guard answers from the quick check alone; after any change the full
walk must still find it, put it back and name it, whatever kind of change it is."""

import types

import pytest
import torch
import torch.nn.functional

import cudabench.measure.blind  # noqa: F401 - the harness's modules, loaded before the snapshot
from cudabench.measure import judged_calls, timers
from cudabench.measure.state import StateGuard


MISSING = object()

# change -> (owner, attribute, the value a subject puts there, the name the guard must report)
CHANGES = {
    "a harness method replaced": (timers.SyncTimer, "samples", lambda *a, **k: [1e-9],
                                  "cudabench.measure.timers.SyncTimer.samples"),
    "a member added to a harness class": (timers.EventTimer, "prepare_fast", print,
                                          "cudabench.measure.timers.EventTimer.prepare_fast"),
    "a harness constant replaced": (judged_calls, "FRESH_SLACK", 10.0, "cudabench.measure.judged_calls.FRESH_SLACK"),
    "a PyTorch function replaced": (torch.nn.functional, "conv1d", lambda *a, **k: None, "torch.nn.functional.conv1d"),
    "an operator added to the tensor class": (torch.Tensor, "__rmatmul__", lambda *a: 0, "torch.Tensor.__rmatmul__"),
    # the timers read the clock through their module's own global `time`
    "a module a harness module calls through replaced": (timers, "time", types.SimpleNamespace(perf_counter=lambda: 0.0),
                                                         "cudabench.measure.timers.time"),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_the_quick_check_lets_no_change_of_any_kind_through(change):
    owner, attr, value, name = CHANGES[change]
    guard = StateGuard(cuda=False)
    assert not guard.restore()
    assert guard.unchanged.holds()  # what the next restore asks first
    before = vars(owner).get(attr, MISSING)
    setattr(owner, attr, value)
    try:
        assert not guard.unchanged.holds()
        assert name in guard.restore().patched
        assert vars(owner).get(attr, MISSING) is before  # put back, or gone again
        assert not guard.restore() and guard.unchanged.holds()
    finally:
        if before is MISSING:
            if attr in vars(owner):
                delattr(owner, attr)
        else:
            setattr(owner, attr, before)


def test_a_name_a_module_gains_is_taken_as_it_is_then_watched():
    """A harness module's new name is no patch (the full walk takes it as it is, as it takes a module
    imported since the snapshot), but replacing it afterwards is."""
    guard = StateGuard(cuda=False)
    first, second = (lambda: "first"), (lambda: "second")
    try:
        timers.added_later = first
        assert not guard.unchanged.holds()
        assert not guard.restore()  # taken as it is
        assert guard.unchanged.holds()
        timers.added_later = second
        assert "cudabench.measure.timers.added_later" in guard.restore().patched
        assert timers.added_later is first
    finally:
        del timers.added_later

