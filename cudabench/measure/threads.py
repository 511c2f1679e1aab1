"""Which host threads a subject's own code starts (the threads check of cudabench.measure.integrity):
`threading.Thread.start` wrapped once per subject process; and the threads the process has as Linux lists
them (/proc/self/task), which also shows a thread that threading never saw: an extension's C++ thread, one
started with `_thread.start_new_thread`."""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

_ENUMERATE, _LISTDIR, _OPEN = threading.enumerate, os.listdir, open  # bound at load, as the guard's readers are


def start_cpu_pool() -> None:
    """The CPU thread pool PyTorch starts at its first parallel operation, started now: before the state
    guard's snapshot a subject process makes one, so that a subject whose code makes a first large CPU op is
    not taken for one that left threads running."""
    import torch

    torch.ones(1 << 22).sum()


def os_threads() -> frozenset[int]:
    """The ids of this process's threads as Linux lists them (empty where it does not)."""
    try:
        return frozenset(int(t) for t in _LISTDIR("/proc/self/task"))
    except (OSError, ValueError):
        return frozenset()


def native_threads(before: frozenset[int]) -> list[str]:
    """Threads made since `before` and running now that no `threading.Thread` stands for (a Python thread
    is the thread watch's to judge), named "native thread ID (its name)"."""
    python = {t.native_id for t in _ENUMERATE()}
    found = []
    for tid in sorted(os_threads() - before - python):
        try:
            with _OPEN(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue  # ended meanwhile
        found.append(f"native thread {tid} ({name})")
    return found


class ThreadWatch:
    """Which Python threads a subject's own code starts. `threading.Thread.start` is wrapped once,
    when the subject process starts (so the state guard protects the wrapper like any harness
    function); while a subject is open, a thread started with a frame of its family's folder on the
    stack is the subject's. Threads PyTorch starts on its own (a compile worker's timer) are not."""

    def __init__(self) -> None:
        self.folder = ""
        self.started: list[threading.Thread] = []
        original = threading.Thread.start
        watch = self

        def start(thread: threading.Thread, *args: Any, **kwargs: Any) -> Any:
            if watch.folder and watch.from_subject():
                watch.started.append(thread)
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

    def running(self) -> list[str]:
        """The subject's threads still running; the watch ends."""
        names = self.alive()
        self.folder, self.started = "", []
        return names


_WATCH: list[ThreadWatch] = []


def thread_watch() -> ThreadWatch:
    if not _WATCH:
        _WATCH.append(ThreadWatch())
    return _WATCH[0]
