"""The parent side of a run: hands each planned subject to a worker and records what comes back.
A worker that dies, hangs past its deadline or breaks the protocol costs only the subject it held:
that subject is recorded with the reason, the worker is replaced, and the run goes on. Builds are
requested once per family per worker (the build cache on disk makes a replacement's a cache hit)."""

from __future__ import annotations

import dataclasses
import random
import time
from typing import Any, Callable, Optional, Sequence

from cudabench.engine.plan import RunOptions, Subject, Task, skips, subjects
from cudabench.engine.worker import case_to_dict
from cudabench.engine.workers import Worker, WorkerLost
from cudabench.errors import CudabenchError
from cudabench.results.export import result_from_dict
from cudabench.results.model import Result

HELLO_TIMEOUT = 300.0    # a worker's start: Python, torch, CUDA, and the ceilings measured once per GPU
BUILD_TIMEOUT = 1800.0   # a family's first JIT build (nvcc and the torch binding)


class WorkerStartError(CudabenchError):
    """The worker could not start (no GPU there, a broken install): nothing can run."""


class Runner:
    def __init__(self, options: RunOptions, start_worker: Callable[[], Worker],
                 kernels_dirs: Sequence[Any] = (), settings: Optional[dict[str, str]] = None,
                 on_result: Callable[[Result], None] = lambda r: None,
                 on_status: Callable[[str], None] = lambda s: None) -> None:
        self.options = options
        self.start_worker = start_worker
        self.on_result = on_result
        self.on_status = on_status
        self.results: list[Result] = []
        self.seed = options.seed if options.seed is not None else random.SystemRandom().randrange(2**31)
        self.hello = {"op": "hello", "kernels_dirs": [str(d) for d in kernels_dirs], "ceilings": options.time,
                      "nvtx": options.nvtx, "nvtx_iterations": options.nvtx_iterations,
                      "settings": settings or {}}
        self.environment: dict[str, Any] = {}
        self.ceilings: Optional[dict[str, Any]] = None
        self.workers_started = 0
        self.waited = {"start-up": 0.0, "build": 0.0}  # seconds the parent waited for workers to start, build
        self._worker: Optional[Worker] = None
        self._starting: Optional[Worker] = None    # launched, hello sent, not yet answered
        self._loaded: set[str] = set()
        self._build_failures: dict[str, str] = {}

    # ---- workers ---------------------------------------------------------------------------------

    def launch(self) -> None:
        """Start the first worker's process and send its hello without waiting: its start-up
        (Python, torch, CUDA) overlaps whatever the caller does next, e.g. planning."""
        if self._worker is None and self._starting is None:
            worker = self.start_worker()
            if hasattr(worker, "send"):
                worker.send(self.hello)
                self._starting = worker
            else:
                self._starting = None
                worker.close()

    def start(self) -> None:
        """Wait until the first worker is ready (its environment and ceilings are then known)."""
        self._ready()

    def _ready(self) -> Worker:
        if self._worker is not None:
            return self._worker
        worker, launched, self._starting = self._starting or self.start_worker(), self._starting is not None, None
        start = time.perf_counter()
        try:
            if launched:
                reply = worker.wait(HELLO_TIMEOUT, self.on_status)
            else:
                reply = worker.request(self.hello, HELLO_TIMEOUT, self.on_status)
        except WorkerLost as lost:
            worker.close()
            raise WorkerStartError(f"The worker process could not start: {lost.reason}",
                                   "Run `cudabench doctor` to see what this machine is missing.") from None
        if reply.get("type") != "ready":
            worker.close()
            error = WorkerStartError(str(reply.get("message", reply)), str(reply.get("hint", "")))
            error.exit_code = int(reply.get("exit_code", error.exit_code))
            raise error
        self.waited["start-up"] += time.perf_counter() - start
        self.environment, self.ceilings = reply["environment"], reply.get("ceilings")
        self.workers_started += 1
        self._worker, self._loaded = worker, set()
        return worker

    def _replace(self) -> None:
        if self._worker is not None:
            self._worker.close()
        self._worker = None

    def close(self) -> None:
        if self._starting is not None:
            self._starting.close()
            self._starting = None
        self._replace()

    def __enter__(self) -> "Runner":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- the run ---------------------------------------------------------------------------------

    def run(self, tasks: Sequence[Task]) -> list[Result]:
        for task in tasks:
            for case in task.cases:
                for name, role, reason in skips(task, case):
                    self._record(Result(case, name, role, skipped=reason))
                for subject in subjects(task, case):
                    self._run(subject)
        return self.results

    def _record(self, result: Result) -> None:
        if result.subject in self.options.renames:
            result = dataclasses.replace(result, subject=self.options.renames[result.subject])
        self.results.append(result)
        self.on_result(result)

    def _run(self, s: Subject) -> None:
        if s.role == "variant":
            failure = self._build(s.family.name)
            if failure:
                self._record(Result(s.case, s.name, s.role, skipped=f"build failed: {failure}"))
                return
        worker = self._ready()
        self.on_status(f"{s.case.key()}: {s.name}")
        request = {"op": "subject", "family": s.family.name, "case": case_to_dict(s.case), "subject": s.name,
                   "role": s.role, "settings": dataclasses.asdict(self.options.settings(self.seed))}
        try:
            reply = worker.request(request, self.options.timeout, self.on_status)
        except WorkerLost as lost:
            self._replace()
            self._record(self._lost(s, lost.reason))
            return
        if reply.get("healthy") is False:
            self._replace()  # its CUDA context is broken: the next subject gets a fresh worker
        if reply.get("type") == "result":
            self._record(result_from_dict(reply["result"]))
        else:
            self._record(self._lost(s, str(reply.get("message", reply))))

    def _lost(self, s: Subject, reason: str) -> Result:
        return Result(s.case, s.name, s.role, error=reason, host=self.environment.get("hostname", ""),
                      gpu=self.environment.get("gpu", ""))

    def _build(self, family: str) -> str:
        """'' once the family is built and loaded in the current worker, else why not."""
        if family in self._build_failures:
            return self._build_failures[family]
        worker = self._ready()
        if family in self._loaded:
            return ""
        self.on_status(f"building {family}")
        start = time.perf_counter()
        try:
            reply = worker.request({"op": "build", "family": family, "arch": self.options.arch}, BUILD_TIMEOUT,
                                   self.on_status)
        except WorkerLost as lost:
            self._replace()
            self._build_failures[family] = lost.reason
            return lost.reason
        self.waited["build"] += time.perf_counter() - start
        if not reply.get("ok"):
            self._build_failures[family] = str(reply.get("message", reply))
            return self._build_failures[family]
        self.on_status(f"built {family} in {reply['seconds']:.1f} s ({'cache hit' if reply['cache_hit'] else 'compiled'})")
        self._loaded.add(family)
        return ""
