"""Processes a subject starts. A binding can hand its work to a process of its own: a helper that maps
the subject's memory over CUDA IPC, or computes on the host, while the call waits for it or not at all.
That work is in none of CUPTI's records of the subject process (the cupti timer, the CUPTI pass and the
serial-calls floor read only those), so it must not exist while a subject is timed.

The judge watches from its own process, which the subject's code never runs in: from just before the
subject is timed until its process state is checked, a thread here lists the subject process's
descendants every POLL seconds. Any process among them that was not there before the subject opened is
its own. Before and after that (its first calls, its random shapes), processes may come and go (a
compiler a first call runs), but one still running when the timing starts, or once the subject is done,
counts too. A process that leaves its parent (a double fork) is still found: the judge's process is a
child subreaper (Linux's PR_SET_CHILD_SUBREAPER), so it is reparented to the judge, not to init, and the
judge's own children that are not subject processes count as the subject's. What a subject's code starts
after its last look (a thread it left behind) is found at the next subject's first look and ended there.

Processes are held by a pidfd from the first sighting (a pid reused later is never signalled), stopped
until none forks another, then killed. Where every round found a new one (a chain that forks and exits
faster than a look), a process group that holds nothing but new processes of this tree (a helper in a
session of its own) is killed whole, which reaches a child forked meanwhile. Zombies are not running and
do not count."""

from __future__ import annotations

import ctypes
import functools
import os
import signal
import threading
import time
from pathlib import Path
from typing import Callable, Iterable, Optional

POLL = 0.02                  # seconds between two looks at the process tree while a subject is timed
STOP_ROUNDS = 50             # rounds of stopping what was seen and looking again, before the kill
PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
SUBREAPER: Optional[bool] = None  # whether this process became one (None: never asked)


def become_subreaper() -> bool:
    """Orphaned descendants of this process's children are reparented to it (Linux); False elsewhere."""
    global SUBREAPER
    try:
        SUBREAPER = ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        SUBREAPER = False
    return SUBREAPER


def _stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name (state first, then the parent's pid); [] when gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:  # not pathlib: a scan of /proc reads thousands of these
            text = f.read()
    except OSError:
        return []
    return text[text.rindex(")") + 2:].split()


def running(pid: int) -> bool:
    return _stat(pid)[:1] not in ([], ["Z"], ["X"])


def process_group(pid: Optional[int]) -> Optional[int]:
    try:
        return os.getpgid(pid) if pid is not None else None
    except OSError:
        return None


def process_table() -> dict[int, list[str]]:
    """Every process's /proc stat fields (state, parent, process group, ...), by pid."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields:
                table[int(entry)] = fields
    return table


def group_members(pgid: int, table: dict[int, list[str]]) -> set[int]:
    """The running processes of process group `pgid` (a zombie takes no signal)."""
    return {pid for pid, fields in table.items() if fields[2] == str(pgid) and fields[0] not in ("Z", "X")}


@functools.lru_cache(maxsize=None)
def _has_children_files() -> bool:
    return Path(f"/proc/self/task/{threading.get_native_id()}/children").exists()


def children(pid: int) -> set[int]:
    """The children of `pid` (each of its threads' /proc children list, which leaves out some zombies: those
    reparented here; a /proc scan where the kernel keeps no such list)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return set()
    if not _has_children_files():
        return {child for child, fields in process_table().items() if fields[1] == str(pid)}
    found: set[int] = set()
    for tid in tasks:
        try:  # not pathlib: a look reads one file per thread (dozens in a CUDA process), every POLL seconds
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                found.update(int(c) for c in f.read().split())
        except (OSError, ValueError):
            continue  # a thread that ended meanwhile
    return found


def descendants(pids: Iterable[int]) -> set[int]:
    """Every process below `pids` (not `pids` themselves), zombies as `children` lists them."""
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


class ProcessWatch:
    """The processes one subject starts: `before` the subject opens, `watch` from just before it is timed,
    `pause` once it is, `stop` once it is done. `subject` gives the subject process's pid (this process's
    own when the subject runs here; None before one is started) and the pids of processes this one
    started on purpose (spare subject processes)."""

    def __init__(self, subject: Callable[[], tuple[Optional[int], set[int]]]) -> None:
        self.subject = subject
        self.known: set[int] = set()
        self.seen: dict[int, str] = {}
        self.error = ""                  # the watch could not look (the verdict fails)
        self._held: dict[int, int] = {}  # pid: pidfd, from its first sighting
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def tree(self) -> set[int]:
        """The running processes below the subject process, and the orphans reparented to this one. Each
        is taken as running when it is listed: a member of a chain that forks and exits lives a few ms,
        less than reaping the hundreds of zombies such a chain leaves here takes on a loaded machine
        (CI saw a look find no running member of a live chain)."""
        pid, ours = self.subject()
        found = {p for p in descendants([pid]) if running(p)} if pid is not None else set()
        if pid != os.getpid():
            orphans = children(os.getpid()) - ours - {pid}
            alive = {p for p in orphans if running(p)}
            self._reap(orphans - alive)
            found |= alive | {p for p in descendants(alive) if running(p)}
        return found - ours

    @staticmethod
    def _reap(orphans: set[int]) -> None:
        """Orphans reparented here that have exited: collected, so that they do not pile up."""
        for pid in orphans:
            if _stat(pid)[:1] == ["Z"]:
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass

    def before(self, after_last: Optional[set[int]] = None) -> dict[int, str]:
        """Before the subject opens: what runs now is not its own. With `after_last`, the tree when the
        last subject's watch ended: what started since (a thread a subject left behind) is ended here,
        and returned."""
        now = self.tree()
        left = {} if after_last is None else {p: describe(p) for p in now - after_last}
        if left:
            self.known, self.seen = set(after_last or ()), dict(left)
            for pid in left:
                self._hold(pid)
            self._end()
            self.seen, now = {}, self.tree()
        self.known = now
        return left

    def look(self) -> None:
        for pid in self.tree() - self.known:
            if pid not in self.seen:
                self.seen[pid] = describe(pid)
                self._hold(pid)

    def _hold(self, pid: int) -> None:
        try:
            self._held[pid] = os.pidfd_open(pid)
        except (OSError, AttributeError):
            pass  # gone already, or no pidfd here: signalled by pid

    def watch(self) -> None:
        self.look()
        self._thread = threading.Thread(target=self._poll, name="cudabench-process-watch", daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        try:
            while not self._stop.wait(POLL):
                self.look()
        except Exception as exc:  # noqa: BLE001 - the verdict says the watch failed
            self.error = f"{type(exc).__name__}: {exc}"

    def pause(self) -> None:
        """The timing is over: processes may come and go again (a compiler for another shape's first
        call), until `stop` looks for those still running."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def stop(self, end_them: bool = True) -> dict[int, str]:
        """What was seen, after one last look; with `end_them` those processes, and any they start
        meanwhile, are ended."""
        self.pause()
        try:
            self.look()
            if end_them:
                self._end()
        except Exception as exc:  # noqa: BLE001
            self.error = self.error or f"{type(exc).__name__}: {exc}"
        finally:
            for fd in self._held.values():
                os.close(fd)
            self._held = {}
        return self.seen

    def _end(self) -> None:
        """Stop every process seen, look again, until a look finds no new one (none can fork while
        stopped), then kill them all and collect those that are this process's children. A chain that
        forks and exits faster than a look outruns signals sent pid by pid, round after round (seen in CI on
        a loaded machine); then its process group, where it holds nothing else, is killed whole: the
        kernel's group signal reaches a child forked meanwhile."""
        groups: set[int] = set()
        for _ in range(STOP_ROUNDS):
            count = len(self.seen)
            for pid in self.seen:
                self._signal(pid, signal.SIGSTOP)
            self.look()
            if len(self.seen) == count:
                break
        else:  # every round found a new process: a chain outran the signals
            groups = self._own_groups()
            for group in groups:
                _signal_group(group, signal.SIGKILL)
        for pid in self.seen:
            self._signal(pid, signal.SIGKILL)
        deadline = time.monotonic() + 1.0
        for pid in self.seen:
            while time.monotonic() < deadline:
                try:
                    if os.waitpid(pid, os.WNOHANG)[0]:
                        break
                except ChildProcessError:
                    break
                time.sleep(0.005)
        for group in groups:
            _reap_group(group)

    def _own_groups(self) -> set[int]:
        """The process groups of the processes seen that hold only processes new below this one (a helper
        started in a session of its own, and all it forks): never this process's group or the subject
        process's, nor one with a process from before the subject opened or from outside this tree."""
        pid, ours = self.subject()
        candidates = {process_group(p) for p in self.seen} - {os.getpgrp(), process_group(pid), None}
        for group in candidates:
            _reap_group(group)  # a chain's exited members, reparented here: thousands make the scan slow
        new = descendants([os.getpid()]) - self.known - ours - {pid}
        table = process_table()
        return {group for group in candidates if group_members(group, table) <= new}

    def _signal(self, pid: int, sig: int) -> None:
        try:
            if pid in self._held:
                signal.pidfd_send_signal(self._held[pid], sig)
            else:
                os.kill(pid, sig)
        except (OSError, AttributeError):
            pass


def _reap_group(pgid: int) -> None:
    """Collect this process's exited children of process group `pgid` (no /proc children list shows a zombie)."""
    try:
        while os.waitpid(-pgid, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass  # none (left) here


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except OSError:
        pass  # the group is gone
