"""What a subject can leave in its process besides the names the state guard compares
(cudabench.measure.state): code set to run later without a thread of its own, and the operating
system's settings of the process. The thread watch finds a thread a subject leaves; these run on the
main thread whenever their trigger comes, in the next subject's timed calls as well:

- hooks: a signal handler (with an interval timer, a periodic call), a gc callback, an import hook,
  the trace or profile function given to new threads, a sys.monitoring tool (Python 3.12), and an
  audit hook (refused from the subject process's start: none can be removed once added);
- garbage whose finalizers make more garbage: each collection, the harness's own or the next
  subject's, runs one more (`settle_garbage`);
- settings: the CPUs the main thread may run on, its niceness and scheduling policy, the resource
  limits, the GIL's switch interval and the recursion limit. Each can slow or break the next subject.

A hook found is put back and named (the subject is INVALID, as for a patched function); what cannot
be put back (a monitoring tool, a limit or priority an unprivileged process cannot restore) is named
as lasting: the subject process is replaced before the next subject."""

from __future__ import annotations

import _signal
import gc
import os
import resource
import signal
import sys
import threading
from typing import Any, Callable

from cudabench.measure import os_signals

# What the guard reads and writes with, bound when this module loads: a subject that replaces
# `signal.getitimer` or `os.sched_getaffinity` in its own process must not blind the guard. These names are
# the harness's own, which the state guard watches like any other (a replaced one is put back first).
_GETSIGNAL, _SETSIGNAL, _GETITIMER, _SETITIMER = _signal.getsignal, signal.signal, signal.getitimer, signal.setitimer
_GETTRACE, _GETPROFILE = threading.gettrace, threading.getprofile
_SETTRACE, _SETPROFILE = threading.settrace, threading.setprofile
_SYS_GETTRACE, _SYS_GETPROFILE, _SYS_SETTRACE, _SYS_SETPROFILE = sys.gettrace, sys.getprofile, sys.settrace, sys.setprofile
_MONITORING = getattr(sys, "monitoring", None)
_GET_TOOL, _GET_EVENTS = (_MONITORING.get_tool, _MONITORING.get_events) if _MONITORING else (None, None)
_SWITCH = (sys.getswitchinterval, sys.setswitchinterval)
_RECURSION = (sys.getrecursionlimit, sys.setrecursionlimit)
_AFFINITY = (getattr(os, "sched_getaffinity", None), getattr(os, "sched_setaffinity", None))
_PRIORITY = (getattr(os, "getpriority", None), getattr(os, "setpriority", None))
_SCHEDULER = (getattr(os, "sched_getscheduler", None), getattr(os, "sched_setscheduler", None),
              getattr(os, "sched_param", None))
_RLIMIT = (resource.getrlimit, resource.setrlimit)
_PRIO_PROCESS = getattr(os, "PRIO_PROCESS", 0)

TIMERS = {"real": signal.ITIMER_REAL, "virtual": signal.ITIMER_VIRTUAL, "prof": signal.ITIMER_PROF}
SIGNALS = sorted(set(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP}, key=int)
LIMITS = {name: getattr(resource, name) for name in dir(resource) if name.startswith("RLIMIT_")}
SETTLE_ROUNDS = 4  # full collections at most until one finds nothing; more: finalizers that keep making garbage
CALLBACKS = gc.callbacks  # the collector's own list: rebinding the module's name leaves this one in use
APPENDABLE = ("sys.meta_path", "sys.path_hooks")  # a library's first import may add its finder at the end


def same(a: Any, b: Any) -> bool:
    """`a` and `b` the same object, or equal plain values, element by element: never a subject's own `__eq__`."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if type(a) in (int, float, bool, str, frozenset):
        return a == b
    return type(a) is tuple and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


SIGNAL_NAMES = {s: _signal_name(s) for s in SIGNALS}


class ProcessHooks:
    """The hooks as the harness left them (read when the state guard is made, at the subject process's start),
    and `restore`."""

    def __init__(self) -> None:
        self.pristine = self.read()

    @staticmethod
    def read() -> dict[str, Any]:
        # the timers first: `restore` goes in this order, and a timer still armed once its signal's handler is
        # back to the default would end the process at its next expiry (seen on the CPU with a 1 ms timer)
        found: dict[str, Any] = {f"the {name} interval timer": _GETITIMER(which) != (0.0, 0.0)
                                 for name, which in TIMERS.items()}
        # the raw handler: signal.getsignal looks it up in an enum, which calls the handler's own __eq__
        found.update({f"the {SIGNAL_NAMES[s]} handler": _GETSIGNAL(s) for s in SIGNALS})
        found["gc.callbacks"] = (gc.callbacks is CALLBACKS, *CALLBACKS)
        found["sys.meta_path"] = tuple(sys.meta_path)
        found["sys.path_hooks"] = tuple(sys.path_hooks)
        found["threading.settrace"] = _GETTRACE()
        found["threading.setprofile"] = _GETPROFILE()
        if _MONITORING is not None:  # a freed tool id keeps its events and callbacks: both are read
            found["sys.monitoring tools"] = tuple((_GET_TOOL(i), _GET_EVENTS(i)) for i in range(6))
        found["sys.addaudithook"] = len(_REFUSED)
        found[ACTIONS] = os_signals.actions(SIGNALS)  # as the kernel holds them: handlers set from C too
        found[BLOCKED] = os_signals.blocked()
        found[POSIX_TIMERS] = os_signals.timers()
        return found

    def restore(self) -> tuple[list[str], list[str], list[str]]:
        """(what differed and was put back, what differed and could not be, what is noted: finders a library
        appended, kept; signal actions and the blocked set changed outside Python, reset)."""
        now, restored, lasting, appended = self.read(), [], [], []
        for name, before in self.pristine.items():
            after = now.get(name)
            if same(after, before) or name in KERNEL_VIEW:
                continue
            if name in APPENDABLE and same(after[:len(before)], before):
                appended.append(f"{name}: {len(after) - len(before)} entries appended")
                self.pristine[name] = after  # a library's own (six, importlib_metadata): taken as it is
                continue
            try:
                _put_back(name, before)
            except (OSError, ValueError, TypeError, RuntimeError):
                lasting.append(name)
                continue
            (lasting if name in LASTING else restored).append(name)
        if now.get("sys.addaudithook") != self.pristine.get("sys.addaudithook"):
            self.pristine["sys.addaudithook"] = now["sys.addaudithook"]  # refused: named once
        put, lost, noted = self._kernel_view()
        return restored + put, lasting + lost, appended + noted

    def _kernel_view(self) -> tuple[list[str], list[str], list[str]]:
        """After the handlers Python sees are back: the signals' actions and the blocked set as the kernel
        holds them, reset and noted (LLVM's crash handlers come with a first Triton compile: an honest
        compiled baseline's doing); POSIX timers made since, deleted (INVALID, as an interval timer)."""
        actions, timers = self.pristine.get(ACTIONS), self.pristine.get(POSIX_TIMERS)
        noted, lasting = os_signals.put_back_actions(actions, SIGNAL_NAMES) if actions is not None else ([], [])
        noted += os_signals.put_back_blocked(self.pristine[BLOCKED])
        deleted, kept = os_signals.delete_timers(timers) if timers is not None else ([], [])
        return deleted, lasting + kept, noted


ACTIONS, BLOCKED, POSIX_TIMERS = "signal actions", "blocked signals", "POSIX timers"
KERNEL_VIEW = (ACTIONS, BLOCKED, POSIX_TIMERS)
LASTING = {"sys.monitoring tools"}  # named, not put back: its events and callbacks cannot all be read


def _put_back(name: str, value: Any) -> None:
    if name.endswith(" handler"):
        sig = next(s for s in SIGNALS if f"the {SIGNAL_NAMES[s]} handler" == name)
        if value is None:  # a handler set from C: cannot be put back from Python
            raise ValueError(name)
        _SETSIGNAL(sig, value)
    elif name.endswith(" interval timer"):
        which = TIMERS[name.split()[1]]
        if value:  # armed before the subject: not the harness's
            raise ValueError(name)
        _SETITIMER(which, 0.0)
    elif name == "gc.callbacks":
        CALLBACKS[:] = list(value[1:])
        gc.callbacks = CALLBACKS
    elif name == "sys.meta_path":
        sys.meta_path[:] = list(value)
    elif name == "sys.path_hooks":
        sys.path_hooks[:] = list(value)
        sys.path_importer_cache.clear()
    elif name == "threading.settrace":
        _SETTRACE(value)
    elif name == "threading.setprofile":
        _SETPROFILE(value)


def cleared_trace() -> list[str]:
    """This thread's trace and profile functions, removed; the names of those that were set."""
    found = [n for n, f in (("sys.settrace", _SYS_GETTRACE()), ("sys.setprofile", _SYS_GETPROFILE())) if f is not None]
    _SYS_SETTRACE(None)
    _SYS_SETPROFILE(None)
    return found


# ---- audit hooks: none may be added in a subject process ---------------------------------------------

_REFUSED: list[str] = []
# Libraries that add an audit hook of their own when first imported, imported before the refusal: an honest
# subject that imports one later is not taken for one that tried. filelock (on the GPU host, 2026-11-28) adds a
# fork-safety hook, and torch.compile imports it at its first compile (.ci/sessions/probe32_audit.py).
HOOKED_IMPORTS = ("filelock",)


def refuse_audit_hooks() -> None:
    """From now on no audit hook can be added in this process (an audit hook runs on every audited event
    and can never be removed). Once per process: the subject process's, never a test's own."""
    import importlib

    for name in HOOKED_IMPORTS:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - absent or broken: a subject that imports it meets the same error
            pass

    def hook(event: str, args: Any) -> None:
        if event == "sys.addaudithook":
            _REFUSED.append(event)
            raise RuntimeError("the subject process takes no audit hooks (cudabench)")

    sys.addaudithook(hook)


# ---- garbage whose finalizers make more ---------------------------------------------------------------

def settle_garbage(collect: Callable[[], int] = gc.collect) -> bool:
    """Full collections until one finds nothing unreachable: a finalizer's new garbage is found by the
    next. False when the last of SETTLE_ROUNDS still found some: finalizers that keep making garbage, so
    that every later collection runs the subject's code again."""
    for _ in range(SETTLE_ROUNDS):
        if collect() == 0:
            return True
    return False


# ---- the operating system's settings of the process ---------------------------------------------------

def os_settings() -> dict[str, tuple[Callable[[], Any], Callable[[Any], None]]]:
    """name -> (read, write) of the process settings a subject could change for the next one (the main
    thread's CPUs, niceness and scheduling policy, each resource limit, the GIL switch interval, the
    recursion limit). A write that fails raises: the setting is lasting."""
    found: dict[str, tuple[Callable[[], Any], Callable[[Any], None]]] = {
        "GIL switch interval": _SWITCH,
        "recursion limit": _RECURSION,
    }
    (get_affinity, set_affinity), (get_priority, set_priority) = _AFFINITY, _PRIORITY
    get_scheduler, set_scheduler, param = _SCHEDULER
    if get_affinity is not None:
        found["CPU affinity"] = (lambda: frozenset(get_affinity(0)), lambda v: set_affinity(0, v))
    if get_priority is not None:
        found["niceness"] = (lambda: get_priority(_PRIO_PROCESS, 0), lambda v: set_priority(_PRIO_PROCESS, 0, v))
    if get_scheduler is not None:
        found["scheduling policy"] = (lambda: get_scheduler(0), lambda v: set_scheduler(0, v, param(0)))
    get_limit, set_limit = _RLIMIT
    for name, which in sorted(LIMITS.items()):
        found[f"resource limit {name}"] = (lambda w=which: get_limit(w), lambda v, w=which: set_limit(w, v))
    return found
