"""Keeps the other processes of the same user out of this one's /proc entries: a subject's code could
otherwise open /proc/<pid>/fd/N of its judge, of the run's parent or of a spare subject process, and
write requests into their pipes (docs/trust.md). PR_SET_DUMPABLE 0 makes those entries root's, and
also ends core dumps and ptrace attaches by the same user; CUDABENCH_DEBUG=1 leaves a process open to
a debugger. Linux only; elsewhere nothing changes."""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import threading
from typing import Iterator

PR_SET_DUMPABLE, PR_GET_DUMPABLE = 4, 3


def seal() -> bool:
    """True once this process is no longer dumpable."""
    if not sys.platform.startswith("linux") or os.environ.get("CUDABENCH_DEBUG") == "1":
        return False
    return _set_dumpable(0)


def _set_dumpable(value: int) -> bool:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _dumpable() -> int:
    try:
        return int(ctypes.CDLL(None).prctl(PR_GET_DUMPABLE, 0, 0, 0, 0))
    except (OSError, AttributeError):
        return 0


_depth, _before, _lock = 0, 0, threading.Lock()


@contextlib.contextmanager
def sealed_while() -> Iterator[None]:
    """This process sealed while any such block runs in it (runs in two threads: until both end), then
    dumpable as it was before the first: the Python API's caller (the user's own process: a notebook, a
    test session) holds the pipes to a run's workers only while the run lasts, and stays open to the
    user's debugger and core dumps outside it."""
    global _depth, _before
    with _lock:
        if _depth == 0:
            _before = _dumpable()
            seal()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _before and not _dumpable():
                _set_dumpable(_before)


def sealed() -> bool:
    try:
        return ctypes.CDLL(None).prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
