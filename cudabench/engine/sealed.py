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
from typing import Iterator

PR_SET_DUMPABLE, PR_GET_DUMPABLE = 4, 3


def seal(dumpable: int = 0) -> bool:
    """True once this process is no longer dumpable (`dumpable` 1: once it is again)."""
    if not sys.platform.startswith("linux") or os.environ.get("CUDABENCH_DEBUG") == "1":
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_DUMPABLE, dumpable, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


@contextlib.contextmanager
def sealed_while() -> Iterator[None]:
    """This process sealed for the block, then as it was: the Python API's caller (the user's own process:
    a notebook, a test session) holds the pipes to a run's workers only while the run lasts, and stays
    open to the user's debugger and core dumps outside it."""
    changed = not sealed() and seal()
    try:
        yield
    finally:
        if changed:
            seal(dumpable=1)


def sealed() -> bool:
    try:
        return ctypes.CDLL(None).prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
