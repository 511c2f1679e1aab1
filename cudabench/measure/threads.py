"""Which host threads a subject's own code starts (the threads check of cudabench.measure.integrity):
`threading.Thread.start` wrapped once per subject process."""

from __future__ import annotations

import sys
import threading
from typing import Any


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
