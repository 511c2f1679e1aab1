"""Which host threads a subject's own code starts (the threads check of cudabench.measure.integrity):
`threading.Thread.start` wrapped once per subject process; and the threads the process has as Linux lists
them (/proc/self/task), by thread id and start time, which also shows a thread that threading never saw: an
extension's C++ thread, one started with `_thread.start_new_thread` or past the wrapper. Those are held
to the threads the process is known to have (cudabench.measure.upkeep)."""

from __future__ import annotations

import os
import sys
import threading
import weakref
from typing import Any

_LISTDIR, _OPEN = os.listdir, open  # bound at load, as the guard's readers are


def start_cpu_pool() -> None:
    """The CPU thread pool PyTorch starts at its first parallel operation, started now: before the state
    guard's snapshot a subject process makes one, so that a subject whose code makes a first large CPU op is
    not taken for one that left threads running."""
    import torch

    torch.ones(1 << 22).sum()


def os_threads(pid: object = "self") -> frozenset[tuple[int, int]]:
    """A process's threads (this one's by default) as Linux lists them: (thread id, start time in clock ticks
    since boot), so that a thread id the kernel hands out again is another thread (empty where Linux does not
    list them, or the process is gone)."""
    try:
        ids = _LISTDIR(f"/proc/{pid}/task")
    except OSError:
        return frozenset()
    found = set()
    for tid in ids:
        try:
            with _OPEN(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                stat = f.read()
            found.add((int(tid), int(stat[stat.rindex(b")") + 2:].split()[19])))  # field 22: starttime
        except (OSError, ValueError, IndexError):
            continue  # ended meanwhile
    return frozenset(found)


def unknown_threads(known: frozenset[tuple[int, int]], apart: frozenset[int] = frozenset(),
                    pid: object = "self") -> list[tuple[int, int, str]]:
    """A process's threads running now that are neither `known` nor (by thread id) `apart`: (thread id, start
    time, its name)."""
    found = []
    for tid, start in sorted(os_threads(pid) - known):
        if tid in apart:
            continue
        try:
            with _OPEN(f"/proc/{pid}/task/{tid}/comm") as f:
                found.append((tid, start, f.read().strip()))
        except OSError:
            continue  # ended meanwhile
    return found


def unwatched_threads(known: frozenset[tuple[int, int]], apart: frozenset[int] = frozenset(),
                      pid: object = "self") -> list[str]:
    """`unknown_threads`, each named "unwatched thread ID (its name)": an extension's C++ thread, one started
    with `_thread` or past the watch's wrapper."""
    return [f"unwatched thread {tid} ({name})" for tid, _, name in unknown_threads(known, apart, pid)]


class ThreadLedger:
    """The judge's own reading of a subject process's threads, from outside it: code in the subject process can
    change what that process reports of itself (the known threads it keeps, the guard that keeps them, the
    reply itself), not what another process reads in /proc. Known: the threads at its hello, and those a
    baseline left."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.known = os_threads(pid)

    def unknown(self) -> list[tuple[int, int, str]]:
        return unknown_threads(self.known, pid=self.pid)

    def after_finish(self, left: dict, trusted: bool, found: list[tuple[int, int, str]]) -> dict:
        """A finish's reply `left` judged against `found` (`unknown()`, read before the process could go),
        whatever the reply says: a variant's make the process lasting (not healthy); a baseline's are noted,
        then known. Threads the reply names already are not named twice."""
        if not found:
            return left
        named = " ".join(str(t) for t in left.get("threads", ()))
        extra = [f"unwatched thread {tid} ({name})" for tid, _, name in found if f"thread {tid} (" not in named]
        left = {**left, "threads": [*left.get("threads", ()), *extra]}
        if trusted:
            self.known = self.known | {(tid, start) for tid, start, _ in found}
            return left
        names = ", ".join(f"thread {tid} ({name})" for tid, _, name in found)
        why = f"threads still running after it was dropped, read by the judge: {names}"
        return {**left, "lasting": [*left.get("lasting", ()), why], "healthy": False}


def start_backward_pool() -> None:
    """PyTorch starts a CPU thread team for each thread that first runs a parallel operation. A CUDA
    backward runs on autograd's device thread, so a subject whose backward makes a large CPU op would start
    that thread's team: started now, before the threads of the process are read."""
    import torch

    class _CpuWorkInBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x * 2

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            start_cpu_pool()
            return grad * 2

    x = torch.zeros(2, device="cuda", requires_grad=True)
    _CpuWorkInBackward.apply(x).sum().backward()


class ThreadWatch:
    """Which Python threads a subject's own code starts. `threading.Thread.start` is wrapped once,
    when the subject process starts (so the state guard protects the wrapper like any harness
    function); while a subject is open, a thread started with a frame of its family's folder on the
    stack is the subject's. Threads PyTorch starts on its own (a compile worker's timer) are not: they are
    kept in `others`, which only a process where the judge runs beside the subject (CPU tests) sets apart
    from the threads Linux lists."""

    def __init__(self) -> None:
        self.folder = ""
        self.started: list[threading.Thread] = []
        self.others: weakref.WeakSet[threading.Thread] = weakref.WeakSet()
        original = threading.Thread.start
        watch = self

        def start(thread: threading.Thread, *args: Any, **kwargs: Any) -> Any:
            if watch.folder and watch.from_subject():
                watch.started.append(thread)
            else:
                watch.others.add(thread)
            return original(thread, *args, **kwargs)

        start.__wrapped__ = original  # type: ignore[attr-defined]
        threading.Thread.start = start  # type: ignore[method-assign]

    def from_subject(self) -> bool:
        frame = sys._getframe(2)
        while frame is not None:
            if frame.f_code.co_filename.startswith(self.folder):
                return True
            frame = frame.f_back
        return False

    def open(self, folder: str) -> None:
        self.folder, self.started = folder, []

    def alive(self) -> list[str]:
        """The subject's threads still running."""
        return [t.name for t in self.started if t.is_alive()]

    def running(self) -> tuple[list[str], frozenset[int]]:
        """The subject's threads still running, by name and thread id; the watch ends."""
        alive = [t for t in self.started if t.is_alive()]
        names, ids = [t.name for t in alive], frozenset(t.native_id for t in alive if t.native_id is not None)
        self.folder, self.started = "", []
        return names, ids

    def others_running(self) -> frozenset[int]:
        """The thread ids of the threads started outside any subject's frames that still run."""
        return frozenset(t.native_id for t in list(self.others) if t.is_alive() and t.native_id is not None)


_WATCH: list[ThreadWatch] = []


def thread_watch() -> ThreadWatch:
    if not _WATCH:
        _WATCH.append(ThreadWatch())
    return _WATCH[0]
