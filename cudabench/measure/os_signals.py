"""The process's signals and timers as the kernel holds them, for the state guard's hooks
(cudabench.measure.process_hooks). Python's `signal.getsignal` shows only what Python itself set: a handler
an extension installs with sigaction (or `faulthandler.register`, or LLVM's crash handlers at a first
Triton compile), a signal the main thread blocks, and a POSIX timer (`timer_create`, which can run C code
on a thread of its own at every expiry) are invisible to it. So the guard keeps each signal's whole
`struct sigaction` as the C library returns it, the main thread's blocked set, and the ids of the
process's POSIX timers (/proc/self/timers), and after a subject writes back whatever differs: the very
handler (a C one too), mask and flags there were, the blocked set, and deletes the timers made since."""

from __future__ import annotations

import ctypes
import os
import signal
from typing import Any, Optional

# bound when the harness loads, as process_hooks' readers are
_SIGMASK, _SIG_SETMASK, _SIG_BLOCK = signal.pthread_sigmask, signal.SIG_SETMASK, signal.SIG_BLOCK
_OPEN = open
_SIGACTION_SIZE = 256      # more than glibc's struct sigaction on x86_64 and aarch64 (152 bytes)
_MACHINE = os.uname().machine
TIMER_DELETE = {"x86_64": 226, "aarch64": 111}.get(_MACHINE)  # the syscall's number
try:
    _LIBC: Any = ctypes.CDLL(None, use_errno=True)
    _SIGACTION, _SYSCALL = _LIBC.sigaction, _LIBC.syscall
except (OSError, AttributeError):
    _LIBC = _SIGACTION = _SYSCALL = None


SA_RESTORER, SA_ONSTACK = 0x04000000, 0x08000000


def _meaningful(raw: bytes) -> bytes:
    """glibc's struct sigaction (x86_64, aarch64) with only what it means kept, the rest zero: the handler
    (bytes 0-8), the first 64 signals of the mask (8-16) and the flags (136-140) but SA_RESTORER and
    SA_ONSTACK. The C library copies stack bytes into the rest of the 128-byte mask, which differ from one
    read to the next, and sets its own restorer (and SA_RESTORER) whenever an action is set; Python sets
    SA_ONSTACK on every action it sets, the default put back too. None says anything of the handler."""
    flags = int.from_bytes(raw[136:140], "little") & ~(SA_RESTORER | SA_ONSTACK)
    return raw[:16] + bytes(120) + flags.to_bytes(4, "little") + bytes(_SIGACTION_SIZE - 140)


def actions(signals: list[int]) -> Optional[dict[int, bytes]]:
    """Each signal's struct sigaction, its meaningful bytes (signals the C library keeps for itself are left out)."""
    if _SIGACTION is None or _MACHINE not in ("x86_64", "aarch64"):
        return None
    found = {}
    for sig in signals:
        buffer = ctypes.create_string_buffer(_SIGACTION_SIZE)
        if _SIGACTION(sig, None, buffer) == 0:
            found[sig] = _meaningful(buffer.raw)
    return found


def put_back_actions(before: dict[int, bytes], names: dict[int, str]) -> tuple[list[str], list[str]]:
    """Every signal whose struct sigaction differs from `before` given it again. Returns (what was put back,
    what could not be), as names."""
    now = actions(list(before))
    if now is None or now == before:
        return [], []
    restored, lasting = [], []
    for sig, action in before.items():
        if now.get(sig) == action:
            continue
        name = f"the {names.get(sig, f'signal {sig}')} action (its handler, mask or flags as the kernel holds them)"
        buffer = ctypes.create_string_buffer(action, _SIGACTION_SIZE)
        (restored if _SIGACTION(sig, buffer, None) == 0 else lasting).append(name)
    return restored, lasting


def blocked() -> frozenset[int]:
    """The signals this thread (the guard's: the main one) blocks."""
    return frozenset(int(s) for s in _SIGMASK(_SIG_BLOCK, []))


def put_back_blocked(before: frozenset[int]) -> list[str]:
    if blocked() == before:
        return []
    _SIGMASK(_SIG_SETMASK, before)
    return ["the blocked signals"]


def timers() -> Optional[frozenset[int]]:
    """The ids of the process's POSIX timers; None where /proc/self/timers is missing."""
    try:
        with _OPEN("/proc/self/timers") as f:
            text = f.read()
    except OSError:
        return None
    return frozenset(int(line.split()[1]) for line in text.splitlines() if line.startswith("ID:"))


def delete_timers(before: frozenset[int]) -> tuple[list[str], list[str]]:
    """Every POSIX timer made since `before`, deleted. Returns (deleted, not deletable) as names."""
    now = timers()
    if now is None:
        return [], []
    deleted, lasting = [], []
    for timer in sorted(now - before):
        name = f"POSIX timer {timer}"
        if _SYSCALL is not None and TIMER_DELETE is not None and _SYSCALL(TIMER_DELETE, ctypes.c_int(timer)) == 0:
            deleted.append(name)
        else:
            lasting.append(name)
    return deleted, lasting
