"""One lane of a run: a worker process on one GPU, replaced whenever it is lost. It starts the
worker (Python, torch, CUDA, the GPU's ceilings), builds each family in it once, and turns one
subject request into one Result, whatever the worker does: a worker that dies, hangs past its
deadline or breaks the protocol costs only the subject it held, recorded with the reason. The
local scheduler runs one lane per GPU; a Dask task keeps one per Dask worker (engine/cluster.py)."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Optional

from cudabench.engine import protocol
from cudabench.engine.workers import HELLO_TIMEOUT, Worker, WorkerLost
from cudabench.errors import CudabenchError
from cudabench.results.exporters.json_document import result_from_dict
from cudabench.results.records.model import Result

BUILD_TIMEOUT = 1800.0   # a family's first JIT build (nvcc and the torch binding)
JUDGE_GRACE = 60.0       # beyond a subject's timeout: the judge's own work (references, verdicts)

Status = Callable[[str], None]


class WorkerStartError(CudabenchError):
    """The worker could not start (no GPU there, a broken install): nothing can run."""


class Lane:
    def __init__(self, start_worker: Callable[[], Worker], hello: dict[str, Any],
                 on_status: Status = lambda s: None) -> None:
        self.start_worker = start_worker
        self.hello = hello
        self.on_status = on_status
        self.environment: dict[str, Any] = {}
        self.ceilings: Optional[dict[str, Any]] = None
        self.workers_started = 0
        self.waited = {"start-up": 0.0, "build": 0.0}  # seconds spent waiting for the worker to start, build
        self.worker: Optional[Worker] = None
        self._starting: Optional[Worker] = None     # launched, hello sent, not yet answered
        self._launching: Optional[threading.Thread] = None
        self._launched_at: Optional[float] = None
        self._launch_error: Optional[BaseException] = None
        self._closed = False
        self._lock = threading.Lock()                # the launch's thread against close()
        self._loaded: set[str] = set()

    # ---- the worker ------------------------------------------------------------------------------

    def launch(self) -> None:
        """Start the worker's process and send its hello, in a thread, without waiting: its start
        overlaps whatever the caller does next (planning, other lanes). Reaching a warm worker that
        has to start first waits for it to import torch and make its CUDA context; in threads, the
        lanes' workers do that at once, not one after another (a first `--gpus all` on four H100s
        spent 20 s starting them in turn)."""
        if self.worker is None and self._starting is None and self._launching is None:
            self._launch_error = None
            self._launched_at = time.perf_counter()
            self._launching = threading.Thread(target=self._launch, daemon=True)
            self._launching.start()

    def _launch(self) -> None:
        try:
            worker = self._start()
        except BaseException as exc:  # noqa: BLE001 - handed to ready(), in the caller's thread
            self._launch_error = exc
            return
        with self._lock:
            if self._closed or not hasattr(worker, "send"):
                worker.close()  # closed meanwhile (Ctrl-C); or a worker that is only asked, not told
                return
            worker.send(self.hello)
            self._starting = worker

    def _joined(self) -> None:
        """Wait for a launch in progress; its error, if it had one, is raised here."""
        if self._launching is not None:
            self._launching.join()
            self._launching = None
        error, self._launch_error = self._launch_error, None
        if error is not None:
            self._launched_at = None
            raise error

    def _start(self) -> Worker:
        try:
            return self.start_worker()
        except WorkerLost as lost:  # a warm worker that could not be reached or started
            raise WorkerStartError(f"The worker process could not start: {lost.reason}",
                                   "Run `cudabench doctor` to see what this machine is missing, or run with "
                                   "--no-warm.") from None

    def model(self, gpu: Any) -> str:
        """The GPU model this lane's subjects are pinned by: its `Gpu`'s name, else what its worker said."""
        return gpu.name if gpu is not None else self.environment.get("gpu", "")

    def ready(self) -> Worker:
        """The worker, started and greeted (its environment and ceilings are then known). The time
        from its launch counts as start-up."""
        if self.worker is not None:
            return self.worker
        self._joined()
        launched = self._starting is not None
        start = self._launched_at if launched and self._launched_at is not None else time.perf_counter()
        if not launched:
            worker = self._start()
            with self._lock:
                if self._closed:  # the run was closed (Ctrl-C) while this one started
                    worker.close()
                    raise WorkerStartError("The run was stopped while its worker started.")
                self._starting = worker
        worker = self._starting  # held there until it answers, so close() can end it meanwhile (Ctrl-C)
        try:
            if launched:
                reply = worker.wait(HELLO_TIMEOUT, self.on_status)
            else:
                reply = worker.request(self.hello, HELLO_TIMEOUT, self.on_status)
        except WorkerLost as lost:
            self._starting = None
            worker.close()
            raise WorkerStartError(f"The worker process could not start: {lost.reason}",
                                   "Run `cudabench doctor` to see what this machine is missing.") from None
        except BaseException:
            self._starting = None
            (worker.kill if hasattr(worker, "kill") else worker.close)()
            raise
        self._starting, self._launched_at = None, None
        if reply.get("type") != "ready":
            worker.close()
            error = WorkerStartError(str(reply.get("message", reply)), str(reply.get("hint", "")))
            error.exit_code = int(reply.get("exit_code", error.exit_code))
            raise error
        self.waited["start-up"] += time.perf_counter() - start
        self.environment, self.ceilings = reply["environment"], reply.get("ceilings")
        self.workers_started += 1
        self.worker, self._loaded = worker, set()
        return worker

    def next_run(self) -> None:
        """A later run on the same worker (a Dask worker keeps its lane between runs): the run's hello
        again, so the judge starts that run afresh and its subjects get a subject process no earlier
        run's subject ran in (families are then loaded again). A worker that does not answer it is
        replaced."""
        if self.worker is None:
            return  # its start sends the hello
        try:
            reply = self.worker.request(self.hello, HELLO_TIMEOUT, self.on_status)
        except WorkerLost:
            reply = {}
        if reply.get("type") != "ready":
            self.replace()
            return
        self.environment, self.ceilings = reply["environment"], reply.get("ceilings")
        self._loaded = set()

    def replace(self) -> None:
        """Drop the worker; the next request starts a fresh one."""
        if self.worker is not None:
            self.worker.close()
        self.worker = None

    def close(self, kill: bool = False) -> None:
        with self._lock:
            self._closed = True  # a launch still reaching its worker closes it itself
            workers = (self._starting, self.worker)
        for worker in workers:
            if worker is not None:
                (worker.kill if kill and hasattr(worker, "kill") else worker.close)()
        self._starting = self.worker = None

    # ---- requests --------------------------------------------------------------------------------

    def build(self, family: str, arch: Optional[str]) -> str:
        """'' once the family is built and loaded in the current worker, else why not."""
        worker = self.ready()
        if family in self._loaded:
            return ""
        self.on_status(f"building {family}")
        start = time.perf_counter()
        try:
            reply = worker.request(protocol.request(protocol.Build(family, arch)), BUILD_TIMEOUT, self.on_status)
        except WorkerLost as lost:
            self.replace()
            return lost.reason
        # what the judge waited for its subject process to start (a warm worker's fresh one) is start-up
        subject_start = float(reply.get("subject_start", 0.0) or 0.0)
        self.waited["start-up"] += subject_start
        self.waited["build"] += max(0.0, time.perf_counter() - start - subject_start)
        if not reply.get("ok"):
            return str(reply.get("message", reply))
        self.on_status(f"built {family} in {reply['seconds']:.1f} s ({'cache hit' if reply['cache_hit'] else 'compiled'})")
        self._loaded.add(family)
        return ""

    def can_send(self, family: Optional[str] = None) -> bool:
        """Whether a request can go to the worker before the one it serves is answered: a worker that is up
        and is told, not only asked, with `family` (if any) loaded already (a build is a request of its
        own, which must not come between a request and its answer)."""
        worker = self.worker
        return (worker is not None and hasattr(worker, "send") and hasattr(worker, "wait")
                and (family is None or family in self._loaded))

    def send(self, request: dict[str, Any]) -> None:
        """Put a subject request in the worker's channel (see can_send); its answer is awaited later with
        `subject(..., sent=True)`, in the order the requests went."""
        assert self.worker is not None
        self.worker.send(request)  # type: ignore[attr-defined]

    def subject(self, request: dict[str, Any], timeout: float, lost: Callable[[str], Result],
                sent: bool = False) -> Result:
        """Run one subject request; `lost(reason)` makes the result when the worker fails it. `sent`: the
        request went ahead (`send`), and only its answer is awaited; its deadline starts now, when the
        worker has answered the requests before it."""
        worker = self.worker if sent else self.ready()
        assert worker is not None
        try:
            # the judge applies the request's timeout to the subject's process and reports; this
            # watchdog is for the judge itself
            deadline = timeout + min(JUDGE_GRACE, timeout)
            reply = (worker.wait(deadline, self.on_status) if sent  # type: ignore[attr-defined]
                     else worker.request(request, deadline, self.on_status))
        except WorkerLost as gone:
            self.replace()
            reason = gone.reason
            if reason.startswith("timed out after"):
                reason = f"timed out after {timeout:g} s (the kernel may not terminate); the worker was killed"
            return lost(reason)
        if reply.get("healthy") is False:
            self.replace()  # its CUDA context is broken: the next subject gets a fresh worker
        if reply.get("type") == "result":
            return result_from_dict(reply["result"])
        return lost(str(reply.get("message", reply)))

    def where(self) -> dict[str, Any]:
        """The host and GPU fields of a Result that ran (or was lost) here."""
        env = self.environment
        return {"host": env.get("hostname", ""), "gpu": env.get("gpu", ""),
                "gpu_index": int(env.get("gpu_index", -1)), "gpu_uuid": env.get("gpu_uuid", "")}
