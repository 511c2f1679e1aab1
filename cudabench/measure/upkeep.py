"""The subject process's upkeep between two subjects (cudabench.measure.blind): before a subject opens, the
process state put back to what it was, whatever came before, and its threads held to those it is known to
have; after a subject, its garbage collected until none is left (its finalizers run then, not in the next
subject's calls), its Python threads read, the state restored and compared, the threads Linux lists read
(so whatever its code did until then is seen as its own) and what it left reported, with whether this
process may serve another subject (cudabench.measure.process_hooks says what "lasting" is)."""

from __future__ import annotations

from typing import Any, Optional

from cudabench.errors import UncleanProcess
from cudabench.measure.memory import release_cached
from cudabench.measure.process_hooks import settle_garbage
from cudabench.measure.threads import os_threads, unwatched_threads


class Upkeep:
    def __init__(self, guard: Any, threads: Any, device: str) -> None:
        self.guard, self.threads, self.device = guard, threads, device
        self.collects = device == "cuda"  # full collections after a subject (a test's own process: too slow)
        self.settled = False  # the last subject left nothing behind (cleared by any request that runs code)
        self.broken = False   # a restore failed: the process must go
        self.known = os_threads()  # the threads this process is known to have: its own, a baseline's

    def take_threads(self) -> None:
        """The threads running now are the process's own: at a hello, after its start-up (a family's spec.py
        among it, as in a fresh process), or after a trusted subject whose threads were noted."""
        self.known = os_threads()
        self.guard.objects.accept(self, "known")  # the harness's own change; read back as it set it

    def before_open(self) -> None:
        """Restore whatever came before (an earlier subject that never finished, or code run since: a hello's
        spec.py, a callback); collect the garbage too, unless a clean finish came last and the restore found
        nothing. Raises when the state cannot be restored, or when a thread runs that the process is not known
        to have: code run since the last finish started it (an extension's loading at a build, a subject whose
        open failed), and it would run beside this subject's timed calls."""
        clean = not self._restored() and self.settled
        self.settled = False
        if self.broken:
            raise UncleanProcess("the subject process's state could not be restored; a new one is needed")
        if self.device == "cuda":  # the last subject's blocks the judge mapped are freed only once collected:
            release_cached(collect=not clean, ipc=True)  # in the baseline, they would come off this one's peak
        unknown = self._unwatched()
        if unknown:  # the reply says the process is not healthy: it is replaced
            raise UncleanProcess(f"the subject process runs threads started since the last subject finished, by "
                                 f"code that was no subject's calls (an extension loaded by a build, a skipped "
                                 f"subject's open): {', '.join(unknown)}; a new process is needed")

    def after_subject(self, traced: list[str], pool: Optional[list[str]], trusted: bool = False) -> dict:
        """What the subject left, once it is dropped: `traced`, the trace hooks already cleared; `pool`, its
        threads alive while it was open (None: no subject was open). A thread of its still running now, or any
        other the process is not known to have (read after the restore, whose code may start one), would run
        on beside the next subjects' timed calls: lasting, unless the subject is `trusted` (a baseline, the
        task's own code: torch.compile's workers), whose threads are only noted and then known."""
        # a collection: under graph timing the timer's lanes close over the subject (a review of ff3e145)
        settled = settle_garbage() if self.collects else True
        still, ids = self.threads.running()
        leftover = self._restored()
        unwatched = self._unwatched(ids)
        threads = ([] if pool is None else pool + [t for t in still if t not in pool]) + unwatched
        lasting = list(leftover.lasting) + ([] if settled else ["garbage whose finalizers keep making more"])
        if (still or unwatched) and not trusted:
            lasting.append(f"threads still running after it was dropped: {', '.join(still + unwatched)}")
        elif still or unwatched:
            self.take_threads()
        if self.device == "cuda":
            release_cached(collect=False, ipc=True)  # a warm process between runs holds no subject's peak
        self.settled = self.collects and settled and not (leftover or traced or threads)
        return {"patched": traced + list(leftover.patched), "changed": list(leftover.changed), "threads": threads,
                "lasting": lasting, "healthy": not lasting and not self.broken}

    def _unwatched(self, apart: frozenset[int] = frozenset()) -> list[str]:
        """Threads running that the process is not known to have, besides `apart` (the subject's threads
        the watch names). Where the judge runs in this process (CPU tests), its threads are set apart too."""
        if self.device != "cuda":
            apart = apart | self.threads.others_running()
        return unwatched_threads(self.guard.objects.kept(self, "known"), apart)

    def _restored(self) -> Any:
        """The guard's restore; one that fails leaves a process that cannot be proven clean (`broken`)."""
        from cudabench.measure.state import Leftover

        try:
            return self.guard.restore()
        except Exception as exc:  # noqa: BLE001 - a process the guard cannot restore is not used again
            self.broken = True
            return Leftover((), (), (f"a state the guard could not restore ({type(exc).__name__})",))
