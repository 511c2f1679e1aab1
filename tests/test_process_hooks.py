"""What a subject can leave in its process that runs later without a thread, or that changes how the next
subject runs (cudabench.measure.process_hooks, through the state guard and the subject runner's finish):
each is named, put back where it can be, and what cannot be put back makes the finish unhealthy, so the
judge replaces the subject process."""

import gc
import os
import resource
import signal
import sys
import threading
import time

import pytest

import cudabench.measure.blind  # noqa: F401 - the harness's modules, loaded before the snapshot
from cudabench.measure import process_hooks
from cudabench.measure.blind import BlindRunner
from cudabench.measure.state import StateGuard
from cudabench.spec.registry import discover

from test_judge import HOSTILE


def _burn(*_):  # what a hook left behind would do on each trigger: take host time from the next subject
    end = time.perf_counter() + 1e-4
    while time.perf_counter() < end:
        pass


class Finder:
    def find_spec(self, *args, **kwargs):
        _burn()
        return None


# hook -> (install it, the name the guard must report)
HOOKS = {
    "a signal handler with an interval timer": (
        lambda: (signal.signal(signal.SIGALRM, _burn), signal.setitimer(signal.ITIMER_REAL, 0.5, 0.5)),
        {"the SIGALRM handler", "the real interval timer"}),
    "a profiling timer": (lambda: signal.setitimer(signal.ITIMER_PROF, 0.5, 0.5), {"the prof interval timer"}),
    "a gc callback": (lambda: gc.callbacks.append(_burn), {"gc.callbacks"}),
    "an import hook": (lambda: sys.meta_path.insert(0, Finder()), {"sys.meta_path"}),
    "a path hook": (lambda: sys.path_hooks.insert(0, _burn), {"sys.path_hooks"}),
    "new threads' trace function": (lambda: threading.settrace(_burn), {"threading.settrace"}),
    "new threads' profile function": (lambda: threading.setprofile(_burn), {"threading.setprofile"}),
}


@pytest.mark.parametrize("hook", sorted(HOOKS))
def test_a_hook_left_to_run_later_is_named_and_removed(hook):
    install, names = HOOKS[hook]
    guard = StateGuard(cuda=False)
    before = process_hooks.ProcessHooks.read()
    try:
        install()
        left = guard.restore()
        assert names <= set(left.patched), left
        assert not left.lasting
        assert process_hooks.ProcessHooks.read() == before  # gone: nothing of it runs for the next subject
        assert not guard.restore()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0.0)
        signal.setitimer(signal.ITIMER_PROF, 0.0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        for hooks, entry in ((gc.callbacks, _burn), (sys.path_hooks, _burn)):
            while entry in hooks:
                hooks.remove(entry)
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, Finder)]
        threading.settrace(None)
        threading.setprofile(None)


def _one_cpu():
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("one CPU: its affinity cannot be narrowed")
    os.sched_setaffinity(0, cpus[:1])


# setting -> (change it, the name the guard must report)
SETTINGS = {
    "the GIL switch interval": (lambda: sys.setswitchinterval(0.5), "GIL switch interval"),
    "the recursion limit": (lambda: sys.setrecursionlimit(120), "recursion limit"),
    "the main thread pinned to one CPU": (_one_cpu, "CPU affinity"),
    "fewer open files allowed": (lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(
        resource.RLIMIT_NOFILE)[1])), "resource limit RLIMIT_NOFILE"),
}


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_a_process_setting_is_named_and_reset(setting):
    change, name = SETTINGS[setting]
    guard = StateGuard(cuda=False)
    read, _ = guard.settings[name]
    before = read()
    try:
        change()
        left = guard.restore()
        assert any(c.startswith(f"{name}:") for c in left.changed), (setting, left)
        assert read() == before and not left.lasting
    finally:
        guard.settings[name][1](before)


def test_a_setting_the_process_may_not_put_back_is_lasting():
    """An unprivileged process cannot lower its niceness again: a subject that raised it leaves it for good
    (here, as root, the write is made to fail as it would for an ordinary user)."""
    guard = StateGuard(cuda=False)
    read, write = guard.settings["niceness"]
    before = read()

    def unprivileged(value):
        if value < read():
            raise PermissionError(1, "Operation not permitted")
        write(value)

    guard.settings["niceness"] = (read, unprivileged)
    os.setpriority(os.PRIO_PROCESS, 0, before + 1)
    try:
        left = guard.restore()
        assert left.lasting == ("niceness",) and left
    finally:
        try:
            write(before)
        except PermissionError:
            pass


class Link:
    """Cyclic garbage whose finalizer burns host time and leaves another like it: every collection runs it again."""

    made = 0

    def __init__(self, left):
        self.cycle, self.left = self, left
        Link.made += 1

    def __del__(self):
        _burn()
        if self.left:
            Link(self.left - 1)


def test_garbage_whose_finalizers_keep_making_garbage_does_not_settle():
    gc.collect()
    Link(left=1)
    assert process_hooks.settle_garbage()  # a finite chain: collected within the rounds
    Link(left=10**6)
    assert not process_hooks.settle_garbage()
    Link.made = 0
    gc.collect()
    assert Link.made == 1  # and on it goes, collection after collection
    gc.disable()
    try:  # end it for this test process: drop each new link without running its finalizer again
        Link.__del__ = lambda self: None
        gc.collect()
    finally:
        gc.enable()


def test_a_finish_that_leaves_a_finalizer_chain_is_unhealthy(runner):
    class Forever(Link):
        def __del__(self):
            Forever(1)

    Forever(1)
    try:
        left = runner.finish()
        assert left["healthy"] is False and left["lasting"] == ["garbage whose finalizers keep making more"]
        assert not runner.settled
    finally:
        Forever.__del__ = lambda self: None
        gc.collect()


def test_a_hook_run_by_the_finish_collection_is_seen_by_its_restore(runner):
    """The finish collects before it restores: a finalizer that patches or hooks runs then, and is named for
    the subject whose garbage it was, not left for the next."""
    class Hooker:
        def __init__(self):
            self.cycle = self

        def __del__(self):
            gc.callbacks.append(_burn)

    Hooker()
    try:
        left = runner.finish()
        assert "gc.callbacks" in left["patched"] and left["healthy"] is True
        assert _burn not in gc.callbacks and not runner.settled
    finally:
        while _burn in gc.callbacks:
            gc.callbacks.remove(_burn)


def test_an_open_after_a_clean_finish_does_not_collect_or_restore_again(runner, monkeypatch):
    restores = []
    real = runner.guard.restore
    monkeypatch.setattr(runner.guard, "restore", lambda: restores.append(1) or real())
    left = runner.finish()
    assert left["healthy"] is True and runner.settled and restores == [1], left
    runner.open("hostile", _case(), "torch", "baseline", _settings(), [])
    assert restores == [1] and not runner.settled  # nothing ran since the finish's own
    runner.finish()
    assert runner.settled
    runner.build("hostile", None)  # loading an extension runs its code: the next open restores again
    runner.open("hostile", _case(), "torch", "baseline", _settings(), [])
    assert restores == [1, 1, 1]


@pytest.fixture
def runner(monkeypatch):
    class Built:
        seconds, cache_hit, arch, directory = 0.0, True, "sm_90", "/nowhere"

    # before the runner: its state guard undoes a later patch of a cudabench function
    monkeypatch.setattr(cudabench.measure.blind, "build", lambda family, arch: Built())
    r = BlindRunner(discover([HOSTILE]), "cpu")
    r.collects = True  # a subject process's full collections, in this test's process
    r.guard.objects.accept(r, "collects")  # set by the harness: no subject's patch
    return r


def _case():
    from cudabench.results.records.model import Case
    return Case("hostile", (("n", 1024),))


def _settings():
    from cudabench.measure.settings import Settings
    return Settings(rule={"kind": "repeat", "count": 3})
