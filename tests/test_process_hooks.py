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
        assert not [c for c in left.changed if " action " in c], left  # Python's own put-back is no C handler
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
    """An ordinary user cannot lower a niceness a subject raised: the write fails and the setting is lasting
    (the reader and writer stand in for the process's, which this test leaves alone)."""
    guard = StateGuard(cuda=False)
    nice = [guard.pristine["niceness"] + 5]

    def unprivileged(value):
        raise PermissionError(1, "Operation not permitted")

    guard.settings["niceness"] = (lambda: nice[0], unprivileged)
    left = guard.restore()
    assert left.lasting == ("niceness",) and left


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
        assert not runner.upkeep.settled
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
        assert _burn not in gc.callbacks and not runner.upkeep.settled
    finally:
        while _burn in gc.callbacks:
            gc.callbacks.remove(_burn)


class Guard:
    def __init__(self, found=()):
        from cudabench.measure.watched import WatchedObjects

        self.found = list(found)  # what each restore finds, in turn (an exception: raised)
        self.objects = WatchedObjects()

    def restore(self):
        from cudabench.measure.state import Leftover

        found = self.found.pop(0) if self.found else ()
        if isinstance(found, Exception):
            raise found
        return Leftover(tuple(found), ())


class Threads:
    def __init__(self, running=lambda: ([], frozenset())):
        self.running = running

    def alive(self):
        return []

    def others_running(self):
        return frozenset()


def upkeep_on_gpu(monkeypatch, guard, threads=None):
    """An upkeep as a GPU subject process has it, its release and collections stood in for; `guard` made
    after the stand-ins (a real state guard undoes a later patch of a cudabench function)."""
    from cudabench.measure import upkeep

    released = []
    monkeypatch.setattr(upkeep, "release_cached", lambda collect, ipc: released.append(collect))
    monkeypatch.setattr(upkeep, "settle_garbage", lambda: True)
    return upkeep.Upkeep(guard(), threads or Threads(), "cuda"), released


def test_an_open_always_restores_and_collects_unless_a_clean_finish_came_last(monkeypatch):
    """Code can run between a finish and the next open (a hello's spec.py, a callback on the old registry):
    the open restores every time, and skips its full collection only where the finish left nothing and its
    own restore found nothing."""
    guard = Guard()
    upkeep, released = upkeep_on_gpu(monkeypatch, lambda: guard)
    upkeep.before_open()
    assert released == [True]  # no finish yet
    assert upkeep.after_subject([], [])["healthy"] and upkeep.settled
    upkeep.before_open()
    assert released[-1] is False and not upkeep.settled
    upkeep.after_subject([], [])
    guard.found = [("torch.Tensor.__rmul__",)]  # patched by code that ran after the finish
    upkeep.before_open()
    assert released[-1] is True
    upkeep.after_subject(["sys.settrace"], [])  # a finish that found something: the next open collects
    assert not upkeep.settled
    upkeep.before_open()
    assert released[-1] is True


def test_a_restore_that_fails_ends_the_subject_process(monkeypatch):
    """A subject that breaks what the guard reads (os.getpriority = None) must not leave every later
    subject failing in a process that is kept."""
    upkeep, _ = upkeep_on_gpu(monkeypatch, lambda: Guard([TypeError("'NoneType' object is not callable")]))
    left = upkeep.after_subject([], [])
    assert left["healthy"] is False and left["lasting"] == ["a state the guard could not restore (TypeError)"]
    with pytest.raises(RuntimeError, match="could not be restored"):
        upkeep.before_open()


def test_the_subjects_threads_are_read_before_the_restore(monkeypatch):
    """Reading a thread runs the subject's code (a Thread subclass's is_alive): the restore after it sees
    what that did, as the subject's."""
    import torch

    from cudabench.measure.state import StateGuard

    before = torch.Tensor.__rmul__

    def sneaky():
        torch.Tensor.__rmul__ = lambda *a: 0
        return [], frozenset()

    upkeep, _ = upkeep_on_gpu(monkeypatch, lambda: StateGuard(cuda=False), Threads(sneaky))
    try:
        left = upkeep.after_subject([], [])
        assert "torch.Tensor.__rmul__" in left["patched"] and not upkeep.settled
        assert torch.Tensor.__rmul__ is before
    finally:
        torch.Tensor.__rmul__ = before


def test_a_hello_for_the_next_run_clears_the_clean_finish():
    from cudabench.engine.subject_worker import SubjectHandler

    handler = SubjectHandler("cpu")
    assert handler.handle({"op": "hello", "kernels_dirs": []})["type"] == "ready"
    handler.runner.upkeep.settled = True
    assert handler.handle({"op": "hello", "kernels_dirs": []})["type"] == "ready"
    assert handler.runner.upkeep.settled is False


class Agreeable:
    """Equal to anything: a comparison by == would take it for what it replaced."""

    def __eq__(self, other):
        return True

    __hash__ = object.__hash__

    def find_spec(self, *args, **kwargs):
        _burn()
        return None


def test_hooks_are_compared_by_identity_not_by_their_own_eq():
    guard = StateGuard(cuda=False)
    first = sys.meta_path[0]
    sys.meta_path[0] = Agreeable()
    try:
        assert "sys.meta_path" in guard.restore().patched
        assert sys.meta_path[0] is first
    finally:
        if isinstance(sys.meta_path[0], Agreeable):
            sys.meta_path[0] = first


def test_a_gc_callback_hidden_by_rebinding_the_list_is_found_and_removed():
    """The collector keeps its own list: `gc.callbacks = []` after appending leaves the callback running."""
    guard = StateGuard(cuda=False)
    gc.callbacks.append(_burn)
    gc.callbacks = []
    try:
        assert "gc.callbacks" in guard.restore().patched
        assert _burn not in process_hooks.CALLBACKS and gc.callbacks is process_hooks.CALLBACKS
    finally:
        gc.callbacks = process_hooks.CALLBACKS
        while _burn in process_hooks.CALLBACKS:
            process_hooks.CALLBACKS.remove(_burn)


def test_a_finder_a_library_appends_at_its_first_import_is_kept_and_noted():
    """six and importlib_metadata append a finder when first imported: an honest subject that imports one
    is not INVALID, and later subjects can still import what it finds."""
    guard = StateGuard(cuda=False)
    finder = Finder()
    sys.meta_path.append(finder)
    try:
        left = guard.restore()
        assert not left.patched and sys.meta_path[-1] is finder
        assert "sys.meta_path: 1 entries appended" in left.changed
        assert not guard.restore()
    finally:
        sys.meta_path.remove(finder)


@pytest.fixture
def runner(monkeypatch):
    class Built:
        seconds, cache_hit, arch, directory = 0.0, True, "sm_90", "/nowhere"

    # before the runner: its state guard undoes a later patch of a cudabench function
    monkeypatch.setattr(cudabench.measure.blind, "build", lambda family, arch: Built())
    r = BlindRunner(discover([HOSTILE]), "cpu")
    r.upkeep.collects = True  # a subject process's full collections, in this test's process
    r.guard.objects.accept(r.upkeep, "collects")  # set by the harness: no subject's patch
    return r


def _case():
    from cudabench.results.records.model import Case
    return Case("hostile", (("n", 1024),))


def _settings():
    from cudabench.measure.settings import Settings
    return Settings(rule={"kind": "repeat", "count": 3})


AUDIT = """
import sys
from cudabench.measure import process_hooks
process_hooks.refuse_audit_hooks()
hooks = process_hooks.ProcessHooks()
seen = []
sys.addaudithook(lambda event, args: seen.append(event))  # refused in silence: Python drops the new hook
sys.audit("cudabench.test")
print("ran" if seen else "refused")
restored, lasting, _ = hooks.restore()
print("named" if "sys.addaudithook" in restored else "unnamed")
print("once" if not hooks.restore()[0] else "again")
"""


def test_no_audit_hook_can_be_added_in_a_subject_process():
    """An audit hook runs on every audited event and can never be removed: the subject process refuses any
    hook a subject adds (Python drops it without a word), and the guard names the attempt once (in a process of its own: a refusing hook
    cannot be taken out of this one either)."""
    import subprocess

    out = subprocess.run([sys.executable, "-c", AUDIT], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[:3] == ["refused", "named", "once"], out.stdout


HOOKED = """
import sys
sys.path.insert(0, sys.argv[1])
from cudabench.measure import process_hooks
process_hooks.HOOKED_IMPORTS = ("hooked_early",)
process_hooks.refuse_audit_hooks()
import hooked_early  # imported before the refusal: its own hook kept, nothing refused
print(len(process_hooks._REFUSED))
import hooked_late   # a library not on the list: refused, as any subject's hook
print(len(process_hooks._REFUSED))
"""


def test_a_library_that_adds_an_audit_hook_at_import_is_imported_before_the_refusal(tmp_path):
    """filelock adds a fork-safety audit hook when first imported, and torch.compile imports it: imported before
    the refusal, an honest compiled baseline is not taken for a subject that tried to add a hook."""
    import subprocess

    for name in ("hooked_early", "hooked_late"):
        (tmp_path / f"{name}.py").write_text("import sys\nsys.addaudithook(lambda event, args: None)\n")
    out = subprocess.run([sys.executable, "-c", HOOKED, str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["0", "1"], out.stdout


def test_replacing_what_the_guard_reads_with_does_not_blind_it():
    """A subject that hides its interval timer and its pinned CPUs behind the readers' public names: the
    guard reads through its own copies, bound when the harness loaded (process_hooks)."""
    guard = StateGuard(cuda=False)
    getitimer, getaffinity = signal.getitimer, os.sched_getaffinity
    cpus = sorted(os.sched_getaffinity(0))
    try:
        signal.setitimer(signal.ITIMER_PROF, 0.5, 0.5)
        signal.getitimer = lambda which: (0.0, 0.0)
        os.sched_getaffinity = lambda pid: set(cpus)
        if len(cpus) > 1:
            os.sched_setaffinity(0, cpus[:1])
        left = guard.restore()
        assert "the prof interval timer" in left.patched
        assert len(cpus) == 1 or any(c.startswith("CPU affinity:") for c in left.changed), left
        assert getitimer(signal.ITIMER_PROF) == (0.0, 0.0) and sorted(getaffinity(0)) == cpus
    finally:
        signal.getitimer, os.sched_getaffinity = getitimer, getaffinity
        signal.setitimer(signal.ITIMER_PROF, 0.0)
        os.sched_setaffinity(0, cpus)


def test_a_harness_modules_private_value_replaced_is_put_back_and_named():
    """Not only its functions, classes and public constants: a cache or a reader bound at import is as much
    the harness (here the reader of interval timers, and the driver the persisting-L2 checks go through)."""
    from cudabench.measure import persisting_l2

    guard = StateGuard(cuda=False)
    reader, drivers = process_hooks._GETITIMER, persisting_l2._DRIVER
    try:
        process_hooks._GETITIMER = lambda which: (0.0, 0.0)
        persisting_l2._DRIVER = [object()]
        patched = set(guard.restore().patched)
        assert {"cudabench.measure.process_hooks._GETITIMER", "cudabench.measure.persisting_l2._DRIVER"} <= patched
        assert process_hooks._GETITIMER is reader and persisting_l2._DRIVER is drivers
        assert not guard.restore()
    finally:
        process_hooks._GETITIMER, persisting_l2._DRIVER = reader, drivers


def _timer_create(signo):
    """A POSIX timer of this process (timer_create, as an extension would make one), armed every 0.5 s."""
    import ctypes

    class SigEvent(ctypes.Structure):
        _fields_ = [("value", ctypes.c_void_p), ("signo", ctypes.c_int), ("notify", ctypes.c_int),
                    ("pad", ctypes.c_byte * 48)]

    class ITimerSpec(ctypes.Structure):
        _fields_ = [("interval", ctypes.c_long * 2), ("value", ctypes.c_long * 2)]

    libc = ctypes.CDLL(None, use_errno=True)
    timer, event = ctypes.c_void_p(), SigEvent(signo=signo, notify=0)  # SIGEV_SIGNAL
    assert libc.timer_create(1, ctypes.byref(event), ctypes.byref(timer)) == 0  # CLOCK_MONOTONIC
    spec = ITimerSpec((0, 500_000_000), (0, 500_000_000))
    assert libc.timer_settime(timer, 0, ctypes.byref(spec), None) == 0


@pytest.mark.skipif(process_hooks.os_signals.actions([signal.SIGUSR2]) is None, reason="no sigaction through ctypes")
def test_signal_actions_set_outside_python_are_given_back_as_the_kernel_held_them():
    """A handler installed from C (faulthandler.register, as an extension's sigaction or LLVM's crash handlers
    would) and a blocked signal: Python's signal.getsignal shows neither. Each signal's whole action goes back
    (a C handler too), and the mask; noted, not INVALID (a first Triton compile installs LLVM's)."""
    import faulthandler

    guard = StateGuard(cuda=False)
    signals = process_hooks.SIGNALS
    before = process_hooks.os_signals.actions(signals), process_hooks.os_signals.blocked()
    try:
        faulthandler.register(signal.SIGUSR2)
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGWINCH])
        assert signal.getsignal(signal.SIGUSR2) is signal.SIG_DFL  # Python's view: unchanged
        left = guard.restore()
        assert any(c.startswith("the SIGUSR2 action") for c in left.changed), left
        assert "the blocked signals" in left.changed and not left.patched and not left.lasting
        assert (process_hooks.os_signals.actions(signals), process_hooks.os_signals.blocked()) == before
        assert not guard.restore()
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGWINCH])
        signal.signal(signal.SIGUSR2, signal.SIG_DFL)


def test_a_c_handler_replaced_by_another_c_handler_is_given_back():
    """Caught before and caught after, and Python's view unchanged: only the handler's address tells them
    apart. The first is faulthandler's (set from C before the snapshot), the second a C function of the
    subject's (a ctypes callback through libc's signal())."""
    import ctypes
    import faulthandler

    if process_hooks.os_signals.actions([signal.SIGUSR1]) is None:
        pytest.skip("no sigaction through ctypes")
    faulthandler.register(signal.SIGUSR1)
    handler = ctypes.CFUNCTYPE(None, ctypes.c_int)(lambda sig: None)
    libc = ctypes.CDLL(None)
    libc.signal.restype = ctypes.c_void_p
    try:
        guard = StateGuard(cuda=False)
        before = process_hooks.os_signals.actions([signal.SIGUSR1])
        libc.signal(signal.SIGUSR1, handler)
        assert process_hooks.os_signals.actions([signal.SIGUSR1]) != before
        left = guard.restore()
        assert any(c.startswith("the SIGUSR1 action") for c in left.changed), left
        assert process_hooks.os_signals.actions([signal.SIGUSR1]) == before
    finally:
        faulthandler.unregister(signal.SIGUSR1)
        signal.signal(signal.SIGUSR1, signal.SIG_DFL)


@pytest.mark.skipif(process_hooks.os_signals.timers() is None or process_hooks.os_signals.TIMER_DELETE is None,
                    reason="no /proc/self/timers, or a machine whose timer_delete syscall is not known here")
def test_a_posix_timer_left_behind_is_deleted_and_named():
    """A POSIX timer fires whatever Python's interval timers say (and with SIGEV_THREAD runs C code on a
    thread of its own); its signal here is one whose handler Python would report, so the timer alone is asked."""
    before = process_hooks.os_signals.timers()
    previous = signal.signal(signal.SIGUSR1, signal.SIG_IGN)  # the timer's expiries harmless until it is gone
    guard = StateGuard(cuda=False)
    try:
        _timer_create(signal.SIGUSR1)
        assert process_hooks.os_signals.timers() != before
        left = guard.restore()
        assert [p for p in left.patched if p.startswith("POSIX timer ")] and not left.lasting, left
        assert process_hooks.os_signals.timers() == before
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_a_variants_thread_still_running_after_the_drop_ends_the_process_and_a_baselines_is_noted(monkeypatch):
    """Its thread would run on beside the next subjects' timed calls; a baseline's (torch.compile's workers) is
    the task's own code, only noted."""
    upkeep, _ = upkeep_on_gpu(monkeypatch, Guard, Threads(running=lambda: (["worker-1"], frozenset())))
    upkeep.before_open()
    left = upkeep.after_subject([], [])
    assert not left["healthy"] and any("worker-1" in why for why in left["lasting"]), left
    assert left["threads"] == ["worker-1"]
    upkeep.before_open()
    left = upkeep.after_subject([], [], trusted=True)
    assert left["healthy"] and left["threads"] == ["worker-1"]


def held_thread():
    """A `_thread` thread (threading does not record it) that runs until the returned callable ends it."""
    import _thread
    import threading

    go, started = threading.Event(), threading.Event()
    _thread.start_new_thread(lambda: (started.set(), go.wait(30)), ())
    started.wait(5)
    return go.set


def test_threads_are_told_apart_by_start_time_so_a_reused_thread_id_is_another_thread():
    from cudabench.measure.threads import os_threads, unwatched_threads

    now = os_threads()
    assert (threading.get_native_id(), os_threads_start(threading.get_native_id())) in now
    reused = frozenset((tid, start + 1) for tid, start in now)  # the same ids, started at other times
    assert len(unwatched_threads(reused)) == len(now) and unwatched_threads(now) == []


def os_threads_start(tid):
    with open(f"/proc/self/task/{tid}/stat", "rb") as f:
        stat = f.read()
    return int(stat[stat.rindex(b")") + 2:].split()[19])


def test_a_thread_started_between_subjects_makes_the_next_open_ask_for_a_fresh_process(monkeypatch):
    """Code that is no subject's calls (an extension's loading at a build, a skipped subject's open) started a
    thread: it would run beside the next subject's timed calls, so the open refuses and says why."""
    from cudabench.errors import UncleanProcess

    upkeep, _ = upkeep_on_gpu(monkeypatch, Guard)
    end = held_thread()
    try:
        with pytest.raises(UncleanProcess, match="unwatched thread .*a new process is needed"):
            upkeep.before_open()
    finally:
        end()


def test_a_baselines_threads_are_noted_and_then_known(monkeypatch):
    """A baseline's threads (torch.compile's workers) are the task's own code: noted, and known from then on,
    so the next open does not take them for a leftover."""
    upkeep, _ = upkeep_on_gpu(monkeypatch, Guard)
    upkeep.before_open()
    end = held_thread()
    try:
        left = upkeep.after_subject([], [], trusted=True)
        assert left["healthy"] and len(left["threads"]) == 1 and left["threads"][0].startswith("unwatched thread")
        upkeep.before_open()
        left = upkeep.after_subject([], [])
        assert left["healthy"] and left["threads"] == [], left
    finally:
        end()


RACE = """
import signal, time
import cudabench.measure.blind
from cudabench.measure.state import StateGuard
guard = StateGuard(cuda=False)
def burn(*_):
    end = time.perf_counter() + 5e-5
    while time.perf_counter() < end:
        pass
for _ in range(300):
    signal.signal(signal.SIGALRM, burn)
    signal.setitimer(signal.ITIMER_REAL, 1e-4, 1e-4)
    left = guard.restore()
    assert "the real interval timer" in left.patched and "the SIGALRM handler" in left.patched, left
print("survived")
"""


def test_an_interval_timer_is_stopped_before_its_handler_goes_back_to_the_default():
    """Put back in the other order, a timer that expires between the two ends the process (SIGALRM's default):
    with a 0.1 ms timer, within a few restores."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", RACE], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "survived" in done.stdout, (done.returncode, done.stderr[-2000:])



CHILD = """
import sys, threading, time, _thread
for line in sys.stdin:
    if line.strip() == "thread":
        _thread.start_new_thread(time.sleep, (30,))
        time.sleep(0.05)
    print("done", flush=True)
"""


def test_the_judges_reading_of_a_subject_process_sees_threads_it_did_not_know_whatever_the_reply_says():
    """The judge reads a subject process's threads from outside (its own reading, and its reply, can be forged
    from inside): a thread started since is named unless the reply names it already, and makes a variant's
    process lasting whatever the reply says (named, or a reply that is not healthy anyway); a baseline's is
    noted and then known, also where its reply named it."""
    import subprocess

    from cudabench.measure.threads import ThreadLedger

    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        def ask(line):
            child.stdin.write(line + "\n")
            child.stdin.flush()
            assert child.stdout.readline().strip() == "done"

        ask("nothing")
        ledger = ThreadLedger(child.pid)
        assert ledger.unknown() == []
        ask("thread")
        found = ledger.unknown()
        assert len(found) == 1 and found[0][0] in {int(t) for t in os.listdir(f"/proc/{child.pid}/task")}, found
        name = f"unwatched thread {found[0][0]} ({found[0][2]})"
        clean = {"threads": [], "lasting": [], "healthy": True}
        left = ledger.after_finish(clean, False, found)
        assert not left["healthy"] and left["threads"] == [name] and "read by the judge" in left["lasting"][0]
        named = ledger.after_finish({**clean, "threads": [name]}, False, found)
        assert not named["healthy"] and named["threads"] == [name]  # named by the process: not twice, still lasting
        forged = ledger.after_finish({**clean, "healthy": False}, False, found)
        assert forged["threads"] == [name] and "read by the judge" in forged["lasting"][0]
        noted = ledger.after_finish({**clean, "threads": [name]}, True, found)
        assert noted["healthy"] and noted["threads"] == [name] and ledger.unknown() == []
    finally:
        child.kill()
        child.wait()
