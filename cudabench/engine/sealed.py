"""Keeps the other processes of the same user out of this one's /proc entries: a subject's code could
otherwise open /proc/<pid>/fd/N of its judge, of the run's parent or of a spare subject process, and
write requests into their pipes (docs/trust.md). PR_SET_DUMPABLE 0 makes those entries root's, and
also ends core dumps and ptrace attaches by the same user; CUDABENCH_DEBUG=1 leaves a process open to
a debugger. Linux only; elsewhere nothing changes."""

from __future__ import annotations

import ctypes
import os
import sys

PR_SET_DUMPABLE, PR_GET_DUMPABLE = 4, 3


def seal() -> bool:
    """True once this process is no longer dumpable."""
    if not sys.platform.startswith("linux") or os.environ.get("CUDABENCH_DEBUG") == "1":
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def sealed() -> bool:
    try:
        return ctypes.CDLL(None).prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
