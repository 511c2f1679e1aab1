"""A run on a Dask distributed cluster: the same subjects, submitted as Dask tasks to workers that
declare `--resources GPU=1` (one Dask worker per GPU). On its node each task runs its subject in an
isolated cudabench worker (a Lane kept between tasks and runs: cudabench.engine.cluster_tasks), which
builds the kernels there, with that node's build cache. cudabench plans and orders the tasks (longest
expected first) and submits each when a GPU it may run on is free; on a cluster of several GPU models it
keeps the subjects of a case on one model. A Dask worker lost mid-task: Dask runs the task again
elsewhere, up to its `distributed.scheduler.allowed-failures`; past that the subject is recorded as
lost. Nothing is dropped silently.

`distributed` is an optional dependency: `pip install "cudabench[cluster]"`."""

from __future__ import annotations

import dataclasses
import random
import secrets
import time
from collections import Counter, deque
from concurrent.futures import CancelledError
from typing import Any, Callable, Optional, Sequence

from cudabench.engine.cluster_tasks import run_subject, worker_environment
from cudabench.engine.lane import HELLO_TIMEOUT
from cudabench.engine.durations import Durations, run_context
from cudabench.engine.shared_shapes import SharedShapes
from cudabench.engine.plan import Planned, PlannedRun, RunOptions, Task, as_plan
from cudabench.errors import CudabenchError
from cudabench.engine.protocol import hello, subject_request
from cudabench.results.exporters.json_document import result_from_dict
from cudabench.results.records.model import Result

GPU = {"GPU": 1}
CONNECT_TIMEOUT = "8s"  # the whole refusal, start-up included, within 10 s
NO_WORKER_GRACE = 120.0   # seconds with work left and no GPU worker in the cluster before giving up


class ClusterError(CudabenchError):
    """No cluster to run on: distributed missing, the scheduler unreachable, no GPU workers."""


def require_distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise ClusterError("--cluster needs Dask distributed, which is not installed.",
                           'Install it with: pip install "cudabench[cluster]"') from None
    return distributed


# ---- the parent ----------------------------------------------------------------------------------

def _may_run(group: Optional[frozenset], live: set[str]) -> set[str]:
    """The live workers of `group` (None: any worker)."""
    return set(live & group) if group is not None else set(live)


def _judges(group: Optional[frozenset]) -> str:
    """Which judges share a random-shapes verdict: those of a case's group of workers (one GPU model)."""
    return ",".join(sorted(group or ()))


class ClusterRunner:
    """Runner's interface (launch, start, run, close, results, environment, ...) over Dask."""

    def __init__(self, address: str, options: RunOptions, kernels_dirs: Sequence[Any] = (),
                 settings: Optional[dict[str, str]] = None, command: Optional[Sequence[str]] = None,
                 on_result: Callable[[Result], None] = lambda r: None,
                 on_status: Callable[[str], None] = lambda s: None) -> None:
        self.address = address
        self.options = options
        self.command = list(command or ())   # empty: each node runs its own Python's worker
        self.on_result, self.on_status = on_result, on_status
        self.results: list[Result] = []
        self.seed = options.seed if options.seed is not None else random.SystemRandom().randrange(2**31)
        self.hello = hello(kernels_dirs, options, settings)
        self.run_token = secrets.token_hex(8)   # tells a Dask worker's kept lane that a new run began
        self.environment: dict[str, Any] = {}
        self.ceilings: Optional[dict[str, Any]] = None
        self.waited = {"start-up": 0.0, "build": 0.0}
        self.gpu_workers: set[str] = set()      # Dask workers with a GPU resource seen during the run
        self.departed: list[str] = []           # ... and those that left mid-run
        self.models: dict[str, str] = {}        # Dask worker -> the GPU model its cudabench worker has
        self.allowed: dict[Any, Optional[frozenset]] = {}  # future -> the workers it may run on (None: any)
        self._shapes = SharedShapes(options.fuzz)
        self.unstarted: set[str] = set()        # Dask workers whose cudabench worker could not start
        self.client: Any = None

    @property
    def workers_started(self) -> int:
        return len({(r.host, r.gpu_uuid) for r in self.results if r.host})

    @property
    def gpu_count(self) -> int:
        return max(len(self.gpu_workers), 1)

    def launch(self) -> None:
        pass

    def notes(self) -> list[str]:
        """Lines for under the tables: Dask workers that left mid-run, or whose cudabench worker could not start."""
        notes = [f"note: Dask worker(s) {', '.join(sorted(self.unstarted))} could not start cudabench's worker and "
                 "ran no subject"] if self.unstarted else []
        if self.departed:
            notes.append(f"note: Dask worker(s) {', '.join(self.departed)} left during the run; Dask ran what they "
                         "held again on the others (a subject lost past distributed.scheduler.allowed-failures "
                         "shows as ERROR)")
        return notes

    def start(self) -> None:
        distributed = require_distributed()
        self.on_status(f"connecting to the Dask scheduler at {self.address}")
        try:
            # an address Dask cannot parse is refused here: a Client that failed in its constructor
            # spends a minute closing itself on garbage collection, then prints "Exception ignored"
            scheme, where = distributed.comm.parse_address(self.address)
            if scheme in ("tcp", "tls", "ws", "wss"):
                distributed.comm.get_address_host_port(self.address)
            elif scheme == "inproc" and distributed.comm.inproc.global_manager.get_listener_for(where) is None:
                raise ValueError("no scheduler of this process listens there")  # (the tests' in-process clusters)
            self.client = distributed.Client(self.address, timeout=CONNECT_TIMEOUT, set_as_default=False)
        except (OSError, TimeoutError, ValueError) as exc:
            raise ClusterError(f"Cannot reach the Dask scheduler at {self.address}: {exc}",
                               "Start one with `dask scheduler`, and its workers with "
                               "`dask worker ADDRESS --nthreads 1 --resources GPU=1` (one per GPU).") from None
        if not self._watch_workers():
            raise ClusterError(f"The Dask cluster at {self.address} has no worker with a GPU resource.",
                               "Start its workers with `--resources GPU=1` (one per GPU).")
        self._start_lanes(sorted(self.gpu_workers))

    def _start_lanes(self, workers: list[str]) -> None:
        """Start every GPU worker's cudabench worker at once and learn its GPU model; the first to
        answer gives the run's environment. Raises only when none can start."""
        start = time.perf_counter()
        futures = {addr: self.client.submit(worker_environment, self.hello, self.command, self.run_token,
                                            resources=GPU, workers=[addr], allow_other_workers=False, pure=False)
                   for addr in workers}
        failures: list[CudabenchError] = []
        for addr, future in futures.items():
            try:
                reply = future.result(timeout=max(1.0, HELLO_TIMEOUT - (time.perf_counter() - start)))
            except CudabenchError as error:
                failures.append(error)
                self.unstarted.add(addr)  # given no subject: each would fail at once, and so take most of them
                continue
            except Exception as exc:  # noqa: BLE001 - a remote failure arrives as its own type
                failures.append(ClusterError(f"The cudabench worker could not start on {addr}: {exc}"))
                self.unstarted.add(addr)
                continue
            self.models[addr] = reply["environment"].get("gpu", "")
            if not self.environment:
                self.environment, self.ceilings = reply["environment"], reply["ceilings"]
        self.waited["start-up"] += time.perf_counter() - start
        if not self.environment:
            raise failures[0]

    def _watch_workers(self) -> set[str]:
        """The Dask workers with a GPU resource now; remembers any that left since the last look."""
        info = self.client.scheduler_info(n_workers=-1)["workers"]
        now = {addr for addr, w in info.items() if (w.get("resources") or {}).get("GPU", 0) >= 1}
        self.departed += sorted(self.gpu_workers - now - set(self.departed))
        self.gpu_workers |= now
        return now

    def run(self, plan: "PlannedRun | Sequence[Task]") -> list[Result]:
        if self.client is None:
            self.start()
        entries = as_plan(plan).entries
        planned: list[tuple[int, Planned]] = []
        positions: list[int] = []
        for position, entry in enumerate(entries):
            if entry.skipped:
                self._record(Result(entry.case, entry.name, entry.role, skipped=entry.skipped), position, positions)
            else:
                planned.append((position, entry))
        durations = Durations(run_context(self.options))
        ranked = durations.ranked(planned)
        where = self._pin_cases([s for _, s in ranked])
        waiting: dict[Optional[frozenset], deque] = {}  # the workers a subject may run on (None: any) -> in rank order
        for place, s in ranked:
            allowed = where.get(s.case.key)
            waiting.setdefault(frozenset(allowed) if allowed else None, deque()).append((place, s))
        futures: dict[Any, tuple[int, Planned]] = {}
        try:
            self._collect(waiting, futures, positions, durations)
        except KeyboardInterrupt:
            self.client.cancel(list(futures))
            raise
        finally:
            durations.save()
            order = sorted(range(len(self.results)), key=lambda i: positions[i])
            self.results[:] = [self.results[i] for i in order]
        return self.results

    def _pin_cases(self, ranked: list[Planned]) -> dict[str, list[str]]:
        """With several GPU models in the cluster, the Dask workers each case may run on: all the
        subjects of a case (compared with each other) on one model, cases spread by expected work
        per worker of each model. With one model: no restriction."""
        groups: dict[str, list[str]] = {}
        for addr, model in sorted(self.models.items()):
            groups.setdefault(model, []).append(addr)
        if len(groups) < 2:
            return {}
        load = dict.fromkeys(groups, 0.0)
        where: dict[str, list[str]] = {}
        for s in ranked:
            key = s.case.key
            if key not in where:
                model = min(groups, key=lambda m: (load[m] + 1e-9) / len(groups[m]))
                where[key] = groups[model]
            model = next(m for m, addrs in groups.items() if addrs is where[key])
            load[model] += s.expected_seconds + 1e-6
        return where

    def _feed(self, waiting: dict, futures: dict, live: set[str]) -> None:
        """Submit the highest-ranked waiting subjects while a GPU they may run on is free: as many in flight
        per group of workers as it has live ones. A task that asks for a resource is given to a worker as
        it is submitted (distributed queues only unrestricted tasks), so one submitted early can wait
        behind a long subject while another GPU idles; and each request is made when it is sent, with the
        random-shapes verdicts known by then."""
        busy = Counter(self.allowed[f] for f in futures)
        for group, queue in waiting.items():
            free = len(_may_run(group, live)) - busy[group]
            while queue and free > 0:
                place, s = queue.popleft()
                # a case's model: those workers only; else, with a worker left out (self.unstarted), the others
                # for as long as one of them is there
                workers = sorted(group) if group is not None else sorted(live) if self.unstarted else None
                future = self.client.submit(run_subject, self.hello, self.command, self.run_token,
                                            self._build_request(s), self._request(s, group), self.options.timeout,
                                            resources=GPU, pure=False, workers=workers,
                                            **({"allow_other_workers": group is None} if workers else {}))
                futures[future], self.allowed[future] = (place, s), group
                free -= 1

    def _collect(self, waiting: dict, futures: dict, positions: list[int], durations: Durations) -> None:
        distributed = require_distributed()
        stranded_since: dict[Optional[frozenset], float] = {}  # a group with work and no live worker: since when
        while futures or any(waiting.values()):
            live = self._watch_workers() - self.unstarted
            self._feed(waiting, futures, live)
            if not futures:  # what waits has no live worker that may run it (yet)
                time.sleep(0.2)
            try:
                with self.client.as_current():
                    distributed.wait(list(futures), timeout=0.5, return_when="FIRST_COMPLETED")
            except (TimeoutError, distributed.TimeoutError, CancelledError):
                pass  # a cancelled task (the scheduler restarted, the connection lost) is done, and recorded below
            # done, not `wait`'s own list: that one also holds a task whose result died with its worker
            # (status "lost"), which Dask computes again: reading it now would wait for that
            for future in sorted((f for f in futures if f.done()), key=lambda f: futures[f][0]):
                place, s = futures.pop(future)
                group = self.allowed.pop(future)
                result = self._outcome(future, s)
                durations.note(s, result)
                self._shapes.note(s, result, _judges(group))
                self._record(result, place, positions)
            stranded = {g for g, queue in waiting.items() if queue} | {self.allowed[f] for f in futures}
            stranded_since = {g: stranded_since.get(g, time.monotonic()) for g in stranded if not _may_run(g, live)}
            given_up = {g for g, since in stranded_since.items() if time.monotonic() - since > NO_WORKER_GRACE}
            if given_up:  # no worker left that may run them
                self._give_up(given_up, waiting, futures, positions)

    def _give_up(self, groups: set, waiting: dict, futures: dict, positions: list[int]) -> None:
        """Record as lost every subject, waiting or submitted, that only the workers `groups` may run."""
        gone = [f for f in futures if self.allowed[f] in groups]
        self.client.cancel(gone)
        for f in gone:
            self.allowed.pop(f)
        lost = [futures.pop(f) for f in gone] + [item for g in groups for item in waiting.pop(g, ())]
        for place, s in sorted(lost, key=lambda item: item[0]):
            self._record(Result(s.case, s.name, s.role, error="lost: no Dask worker that may run it "
                                f"(its GPU model) for {NO_WORKER_GRACE:g} s"), place, positions)

    def _outcome(self, future: Any, s: Planned) -> Result:
        distributed = require_distributed()
        try:
            reply = future.result()
        except distributed.KilledWorker:
            return Result(s.case, s.name, s.role, error="lost: the Dask workers it was given to died "
                          "(distributed.scheduler.allowed-failures reached)")
        except Exception as exc:  # noqa: BLE001 - the task's own failure, recorded against it
            return Result(s.case, s.name, s.role, error=f"lost: the Dask task failed: {type(exc).__name__}: {exc}")
        for key, seconds in reply["waited"].items():
            self.waited[key] = self.waited.get(key, 0.0) + seconds
        return result_from_dict(reply["result"])

    def _request(self, s: Planned, group: Optional[frozenset]) -> dict[str, Any]:
        return subject_request(s, self.options, self.seed, self._shapes.for_request(s, _judges(group)))

    def _build_request(self, s: Planned) -> Optional[dict[str, Any]]:
        return {"family": s.family, "arch": self.options.arch} if s.role == "variant" else None

    def _record(self, result: Result, place: int, positions: list[int]) -> None:
        if result.subject in self.options.renames:
            result = dataclasses.replace(result, subject=self.options.renames[result.subject])
        self.results.append(result)
        positions.append(place)
        self.on_status(f"{result.case.key}: {result.subject} {result.status}")
        self.on_result(result)

    def close(self) -> None:
        if self.client is not None:
            self.client.close()  # the user's cluster stays up; only this client leaves
            self.client = None

    def __enter__(self) -> "ClusterRunner":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
