"""Processes a subject starts. A binding can hand its work to a process of its own: a helper that maps
the subject's memory over CUDA IPC, or computes on the host, while the call waits for it or not at all.
That work is in none of CUPTI's records of the subject process (the cupti timer, the CUPTI pass and the
serial-calls floor read only those), so it must not exist while a subject is timed.

The judge watches from its own process, which the subject's code never runs in: from just before the
subject is timed until its process state is checked, a thread here lists the subject process's
descendants every POLL seconds. Any process among them that was not there before the subject opened is
its own. Before and after that (its first calls, its random shapes), processes may come and go (a
compiler a first call runs), but one still running when the timing starts, or once the subject is done,
counts too. A process that leaves its parent (a double fork) is still found:
the judge's process is a child subreaper (Linux's PR_SET_CHILD_SUBREAPER), so it is reparented to the
judge, not to init, and the judge's own children that are not subject processes count as the subject's."""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import time
from pathlib import Path
from typing import Callable, Iterable, Optional

POLL = 0.02                  # seconds between two looks at the process tree while a subject is timed
PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>


def become_subreaper() -> bool:
    """Orphaned descendants of this process's children are reparented to it (Linux); False elsewhere."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def children(pid: int) -> set[int]:
    """The live children of `pid` (each of its threads' /proc children list; a /proc scan where the
    kernel has none)."""
    found: set[int] = set()
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            found.update(int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split())
        except FileNotFoundError:
            return _children_by_scan(pid)
        except (OSError, ValueError):
            continue
    return found


def _children_by_scan(pid: int) -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2:].split()[1]) == pid:
                found.add(int(entry))
    return found


def descendants(pids: Iterable[int]) -> set[int]:
    """Every live process below `pids` (not `pids` themselves)."""
    seen: set[int] = set()
    todo = list(pids)
    while todo:
        for child in children(todo.pop()):
            if child not in seen:
                seen.add(child)
                todo.append(child)
    return seen


def describe(pid: int) -> str:
    """A process as a user would recognise it: its pid and command line."""
    try:
        line = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        line = ""
    return f"pid {pid} ({line[:120] or 'exited'})"


def end(pids: Iterable[int]) -> None:
    """Kill the processes and reap those that are this process's children (reparented orphans)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            continue
        for _ in range(100):  # a killed process exits at once; a child of this one is reaped here
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    break
            except ChildProcessError:
                break
            time.sleep(0.01)


class ProcessWatch:
    """The processes one subject starts: `before` the subject opens, `watch` from just before it is timed,
    `stop` once its process state is checked. `subject` gives the subject process's pid (this process's
    own when the subject runs here) and the pids of other processes this one started on purpose."""

    def __init__(self, subject: Callable[[], tuple[Optional[int], set[int]]]) -> None:
        self.subject = subject
        self.known: set[int] = set()
        self.seen: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def _tree(self) -> set[int]:
        pid, ours = self.subject()  # pid None: the subject process is not started yet
        found = descendants([pid]) if pid is not None else set()
        if pid != os.getpid():  # orphans reparented to this process (a subreaper) are the subject's too
            orphans = children(os.getpid()) - ours - {pid}
            found |= orphans | descendants(orphans)
        return found - ours

    def before(self) -> None:
        self.known = self._tree()

    def look(self) -> None:
        for pid in self._tree() - self.known:
            self.seen.setdefault(pid, describe(pid))

    def watch(self) -> None:
        self.look()
        self._thread = threading.Thread(target=self._poll, name="cudabench-process-watch", daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.wait(POLL):
            self.look()

    def pause(self) -> None:
        """The timing is over: processes may come and go again (a compiler for another shape's first
        call), until `stop` looks for those still running."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def stop(self, end_them: bool = True) -> dict[int, str]:
        """What was seen, after one last look; with `end_them` the processes still running are ended."""
        self.pause()
        self.look()
        if end_them:
            end(self.seen)
        return self.seen
