"""The judge's handle on its subject process: started on first use (or early, to overlap its start
with the judge's), replaced whenever it is lost. A subject process that dies, hangs past its deadline,
breaks the protocol or reports a broken CUDA context costs only the subject it held: the judge records
that, and the next request starts a fresh one."""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Callable, Optional, TypeVar

from cudabench.engine.workers import HELLO_TIMEOUT, ProcessWorker, Worker, WorkerLost
from cudabench.measure.judge import SubjectLost
from cudabench.measure.threads import ThreadLedger

T = TypeVar("T")


def alive(worker: Worker) -> bool:
    """False once a worker's process has exited (a worker in this process is always alive)."""
    proc = getattr(worker, "proc", None)
    return proc is None or proc.poll() is None


def subject_command(python: str = sys.executable, spare: bool = False) -> list[str]:
    return [python, "-m", "cudabench.engine.subject_worker", *(["--spare"] if spare else [])]


class SubjectLink:
    def __init__(self, start: Callable[[], Worker], hello: dict[str, Any],
                 on_status: Callable[[str], None] = lambda s: None,
                 start_spare: Optional[Callable[[], Worker]] = None) -> None:
        self.start = start
        self.start_spare = start_spare or start  # a process that does no GPU work before its hello
        self.hello = hello
        self.on_status = on_status
        self.worker: Optional[Worker] = None
        self._greeted: Optional[bool] = False  # None: a hello sent, not yet answered
        self._sent: dict[str, Any] = {}        # the hello last sent
        self.started = 0
        self.waited = 0.0                      # seconds spent waiting for a subject process to start
        self.spare: Optional[tuple[Worker, dict[str, Any]]] = None  # started, no subject ever ran in it
        self.threads: Optional[ThreadLedger] = None  # the process's threads read from here (a process of its own)
        self.dropped_threads: list[tuple[int, int, str]] = []  # its unknown threads, read as it was dropped

    @classmethod
    def process(cls, hello: dict[str, Any], on_status: Callable[[str], None]) -> "SubjectLink":
        def start(spare: bool = False) -> Worker:
            return ProcessWorker(subject_command(spare=spare), echo=lambda line: print(line, file=sys.stderr))

        return cls(start, hello, on_status, start_spare=lambda: start(spare=True))

    def launch(self) -> None:
        """Start the process and send its hello without waiting for the answer."""
        if self.worker is None:
            self.worker, self._sent = self._started()
            self._greeted = None if self._sent else False  # None: sent, not yet answered

    def _started(self) -> tuple[Worker, dict[str, Any]]:
        """A new process, its hello sent (where it takes one without a request)."""
        worker = self.start()
        self.started += 1
        return worker, self._greeting(worker)

    def _greeting(self, worker: Worker) -> dict[str, Any]:
        if not hasattr(worker, "send"):
            return {}
        worker.send(self.hello)
        return self.hello

    def renew(self) -> None:
        """The current process ends. The spare takes its place (started a run ago, so a run that comes
        straight after finds it imported) and is greeted now: its CUDA context and first GPU calls are
        made while no subject is timed (the end of a run; a run that comes at once waits for its answer
        before its first subject). A new spare starts, which does no GPU work until it takes over in
        turn. No subject runs in a spare before it takes over, so no run's subjects share a process with
        an earlier run's."""
        self.drop()
        spare, self.spare = self.spare, None
        if spare is not None and alive(spare[0]):
            self.worker = spare[0]
            self._sent = self._greeting(self.worker)
            self._greeted = None if self._sent else False
        else:  # none, or it died while it waited (killed, out of memory): a fresh one
            if spare is not None:
                spare[0].close()
            self.launch()
        self.keep_spare()

    def keep_spare(self) -> None:
        """Start the spare now, if there is none (a worker that will serve several runs starts it with
        its first, so that even its second run finds one ready). It is not greeted until it takes over:
        until then it only imports, beside the runs of the process it will replace."""
        if self.spare is None:
            self.spare = (self.start_spare(), {})
            self.started += 1

    def _ready(self, timeout: float) -> Worker:
        self.launch()
        worker = self.worker
        if self._greeted is True:
            return worker
        start = time.perf_counter()
        try:
            self._greet(worker, timeout)
        finally:
            self.waited += time.perf_counter() - start
        return worker

    def take_waited(self) -> float:
        """Seconds waited for subject processes to start since the last call (a warm worker's next run
        can find the one started after the last run still starting: that is start-up, not build)."""
        waited, self.waited = self.waited, 0.0
        return waited

    def _greet(self, worker: Worker, timeout: float) -> None:
        if self._greeted is None:  # the hello sent at launch: its answer first
            self._answered(lambda: worker.wait(min(timeout, HELLO_TIMEOUT), self.on_status))
        if self._greeted is not True or self._sent != self.hello:  # (a later run's hello since then)
            hello = self._sent = self.hello
            self._answered(lambda: worker.request(hello, min(timeout, HELLO_TIMEOUT), self.on_status))
        self._greeted = True

    def _answered(self, reply_of: Callable[[], dict[str, Any]]) -> None:
        try:
            reply = reply_of()
        except WorkerLost as lost:
            self.drop()
            raise SubjectLost(f"the subject process could not start: {lost.reason}") from None
        if reply.get("type") != "ready":
            self.drop()
            raise SubjectLost(f"the subject process could not start: {reply.get('message', reply)}")
        self._greeted = True
        proc = getattr(self.worker, "proc", None)  # its threads now are its own, as it takes them at its hello
        self.threads = ThreadLedger(proc.pid) if proc is not None else None

    def ask(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        worker = self._ready(timeout)
        return self._answer(lambda: worker.request(request, timeout, self.on_status))

    def ask_while(self, request: dict[str, Any], timeout: float, work: Callable[[], T]) -> tuple[dict[str, Any], T]:
        """`ask`, with `work` done in this process while the subject process answers (a worker in this
        process answers first). The answer is taken even when `work` fails, so the next request's
        answer is its own."""
        worker = self._ready(timeout)
        if not hasattr(worker, "send"):
            return self.ask(request, timeout), work()
        end = time.monotonic() + timeout
        worker.send(request)
        try:
            value = work()
        finally:
            reply = self._answer(lambda: worker.wait(max(end - time.monotonic(), 1e-3), self.on_status))
        return reply, value

    def _answer(self, reply_of: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        try:
            reply = reply_of()
        except WorkerLost as lost:
            self.drop()
            raise SubjectLost(lost.reason) from None
        if reply.get("healthy") is False:  # its threads read first: the judge's, whatever the reply says
            self.dropped_threads = self.threads.unknown() if self.threads is not None else []
            self.drop()  # its CUDA context is broken: the next subject gets a fresh process
        return reply

    def process_ids(self) -> tuple[Optional[int], set[int]]:
        """The subject process's pid (this process's where the subject runs here; None before one is
        started) and the spare's, for the judge's watch on the processes a subject starts."""
        worker = self.worker
        pid = None if worker is None else getattr(getattr(worker, "proc", None), "pid", os.getpid())
        spare = getattr(self.spare[0], "proc", None) if self.spare else None
        return pid, ({spare.pid} if spare is not None else set())

    def rehello(self, hello: dict[str, Any]) -> None:
        """A new run's hello: sent again before the next request (the process reads the kernels
        folders again and keeps everything else)."""
        self.hello = hello
        if self._greeted is True and self._sent != hello:
            self._greeted = False

    def drop(self) -> None:
        if self.worker is not None:
            self.worker.close()
        self.worker = None
        self._greeted = False
        self.threads = None

    def close(self) -> None:
        self.drop()
        if self.spare is not None:
            self.spare[0].close()
            self.spare = None
