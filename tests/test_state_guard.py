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


def test_a_name_a_module_gains_is_removed_unless_it_is_a_submodule_imported_since():
    """A name added to a harness module shadows a builtin its functions use (`float` in stats: every later
    summary halved); a package gains its submodules as they are imported, which is no patch. So are names
    added to builtins themselves."""
    import builtins
    import importlib
    import sys

    from cudabench.results.records import stats

    guard = StateGuard(cuda=False)
    stats.float = lambda v: builtins.float(v) * 0.5
    builtins.cudabench_extra = print
    try:
        assert not guard.unchanged.holds()
        assert {"cudabench.results.records.stats.float", "builtins.cudabench_extra"} <= set(guard.restore().patched)
        assert "float" not in vars(stats) and not hasattr(builtins, "cudabench_extra")
        assert not guard.restore()
        fresh = [m for m in ("cudabench.spec.fuzz", "cudabench.results.compare.verdicts") if m not in sys.modules]
        for name in fresh:
            importlib.import_module(name)
        assert not guard.restore().patched  # submodules imported since: taken as they are
    finally:
        vars(stats).pop("float", None)
        vars(builtins).pop("cudabench_extra", None)


def _zero(self, call, count, before_each=None, keep=False):
    return [0.0] * count


def _restored_after(change, undo):
    guard = StateGuard(cuda=False)
    assert not guard.restore()
    change()
    try:
        assert guard.unchanged.holds()  # no name changed: only what a function runs
        patched = list(guard.restore().patched)
        assert not guard.restore()
        return patched
    finally:
        undo()


def test_what_a_watched_function_runs_is_compared_as_well_as_which_object_it_is():
    """Its code, its defaults and keyword defaults, and the values in its closure: each can be changed with
    the function object left in place."""
    from cudabench.measure import process_hooks

    samples = timers.EventTimer.samples
    code, defaults = samples.__code__, process_hooks.settle_garbage.__defaults__
    assert _restored_after(lambda: setattr(samples, "__code__", _zero.__code__),
                           lambda: setattr(samples, "__code__", code)) == \
        ["cudabench.measure.timers.EventTimer.samples.__code__"]
    assert samples.__code__ is code
    assert _restored_after(lambda: setattr(process_hooks.settle_garbage, "__defaults__", (lambda: 0,)),
                           lambda: setattr(process_hooks.settle_garbage, "__defaults__", defaults)) == \
        ["cudabench.measure.process_hooks.settle_garbage.__defaults__"]
    assert process_hooks.settle_garbage.__defaults__ is defaults


def test_a_function_a_watched_closure_holds_is_watched_too():
    """A PyTorch function made by a factory (F.max_pool2d dispatches to one of two functions its closure
    holds): the cell's value, and the code of the function in it."""
    import functools

    wrapper = torch.nn.functional.max_pool2d
    cell = next(c for c in wrapper.__closure__ if isinstance(c.cell_contents, types.FunctionType))
    inner = cell.cell_contents
    code = inner.__code__
    patched = _restored_after(lambda: setattr(cell, "cell_contents", functools.partial(inner)),
                              lambda: setattr(cell, "cell_contents", inner))
    assert patched == ["torch.nn.functional.max_pool2d.__closure__"] and cell.cell_contents is inner
    patched = _restored_after(lambda: setattr(inner, "__code__", (lambda *a, **k: None).__code__),
                              lambda: setattr(inner, "__code__", code))
    assert len(patched) == 1 and patched[0].endswith(".__code__") and inner.__code__ is code


def test_keyword_defaults_changed_in_place_are_put_back():
    guard = StateGuard(cuda=False)
    target = next(f for f in guard.internals.functions if f.__kwdefaults__)
    key, before = next(iter(target.__kwdefaults__.items()))
    target.__kwdefaults__[key] = object()
    try:
        assert [p for p in guard.restore().patched if p.endswith(".__kwdefaults__")]
        assert target.__kwdefaults__[key] is before
    finally:
        target.__kwdefaults__[key] = before

