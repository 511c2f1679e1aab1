"""The parent side of a run: hands each planned subject to a lane (a worker on one GPU, see
lane.py) and records what comes back. With one GPU (the default) subjects run in plan order in
this thread. With several (`--gpus`), one thread per GPU takes the next subject as soon as its
lane is free, longest expected first; the subjects of one case, which are compared with each
other, all run on one GPU model. Results are recorded as they arrive and put back in plan order
at the end. Builds happen once per family per worker, one worker at a time (the first compiles,
the rest find the cache)."""

from __future__ import annotations

import dataclasses
import random
import threading
from typing import Any, Callable, Optional, Sequence

from cudabench.engine.gpus import Gpu
from cudabench.engine.lane import Lane, WorkerStartError
from cudabench.engine.durations import Durations, run_context
from cudabench.engine.plan import Planned, PlannedRun, RunOptions, Task, as_plan
from cudabench.engine.protocol import hello, subject_request
from cudabench.engine.shared_shapes import SharedShapes
from cudabench.engine.workers import Worker
from cudabench.results.records.model import Result

__all__ = ["Runner", "WorkerStartError"]

StartWorker = Callable[[Optional[Gpu]], Worker]


class Runner:
    def __init__(self, options: RunOptions, start_worker: StartWorker,
                 kernels_dirs: Sequence[Any] = (), settings: Optional[dict[str, str]] = None,
                 on_result: Callable[[Result], None] = lambda r: None,
                 on_status: Callable[[str], None] = lambda s: None, gpus: Sequence[Gpu] = ()) -> None:
        self.options = options
        self.on_result = on_result
        self.on_status = on_status
        self.results: list[Result] = []
        self._shapes = SharedShapes(options.fuzz)
        self.seed = options.seed if options.seed is not None else random.SystemRandom().randrange(2**31)
        self.hello = hello(kernels_dirs, options, settings)
        self.gpus: list[Optional[Gpu]] = list(gpus) or [None]
        self.lanes = [self._lane(gpu, start_worker) for gpu in self.gpus]
        self._lock = threading.Lock()          # results and the queue
        self._report = threading.Lock()        # the callbacks (e.g. rewriting the results file), one at a time
        self._build_locks: dict[str, threading.Lock] = {}
        self._build_failures: dict[str, str] = {}
        self._built: set[str] = set()             # families some lane has built: the cache has them
        self._stop = threading.Event()
        self._positions: list[int] = []        # each result's place in the plan
        self._busy: set[Lane] = set()          # lanes whose worker is judging a subject now
        self._active: set[Lane] = set()        # lanes still in the run (starting or serving), several GPUs
        self._failed: set[Lane] = set()        # lanes whose worker could not start (again)

    def _lane(self, gpu: Optional[Gpu], start_worker: StartWorker) -> Lane:
        prefix = f"GPU {gpu.index}: " if gpu is not None and len(self.gpus) > 1 else ""
        return Lane(lambda: start_worker(gpu), self.hello, lambda text: self.on_status(prefix + text))

    # ---- what the first lane found (one GPU's view: the table header) ---------------------------

    @property
    def environment(self) -> dict[str, Any]:
        return next((lane.environment for lane in self.lanes if lane.environment), {})

    @property
    def ceilings(self) -> Optional[dict[str, Any]]:
        return next((lane.ceilings for lane in self.lanes if lane.ceilings), None)

    @property
    def workers_started(self) -> int:
        return sum(lane.workers_started for lane in self.lanes)

    @property
    def gpu_count(self) -> int:
        return len(self.lanes)

    @property
    def waited(self) -> dict[str, float]:
        """Seconds the lanes waited for workers to start and to build, summed over lanes."""
        return {k: sum(lane.waited[k] for lane in self.lanes) for k in ("start-up", "build")}

    # ---- workers ---------------------------------------------------------------------------------

    def launch(self) -> None:
        """Start every lane's worker without waiting (their start-up overlaps the caller's planning)."""
        for lane in self.lanes:
            lane.launch()

    def start(self) -> None:
        """Wait until one lane's worker is ready (the first that can start); the others start
        meanwhile. Raises the first lane's error only when none can start."""
        self.launch()
        failures = []
        for lane in self.lanes:
            try:
                lane.ready()
                return
            except WorkerStartError as error:
                failures.append(error)
        raise failures[0]

    def close(self) -> None:
        for lane in self.lanes:
            lane.close(kill=self._stop.is_set())

    def __enter__(self) -> "Runner":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- the run ---------------------------------------------------------------------------------

    def run(self, plan: "PlannedRun | Sequence[Task]", kept: Optional[dict[int, Result]] = None) -> list[Result]:
        """Run a plan (tasks are planned here); the results in plan order. `kept`: plan positions whose
        result is taken from an earlier run (cudabench.engine.kept), recorded as they are."""
        planned = as_plan(plan)
        queue: list[tuple[int, Planned]] = []   # (place in the plan, subject)
        for position, entry in enumerate(planned.entries):
            if kept and position in kept:
                self._record(kept[position], position)
            elif entry.skipped:
                self._record(Result(entry.case, entry.name, entry.role, skipped=entry.skipped), position)
            else:
                queue.append((position, entry))
        durations = Durations(run_context(self.options))
        if len(self.lanes) > 1:
            queue = durations.ranked(queue)
        try:
            if len(self.lanes) == 1:
                self._serve(self.lanes[0], queue, durations=durations)
            else:
                self._run_lanes(queue, durations)
        finally:  # in plan order: skips were recorded first, and lanes finish in any order
            durations.save()
            with self._lock:
                ordered = sorted(zip(self._positions, self.results), key=lambda pair: pair[0])
                self._positions, self.results = [p for p, _ in ordered], [r for _, r in ordered]
        return self.results

    def _run_lanes(self, queue: list[tuple[int, Planned]], durations: Durations) -> None:
        pinned: dict[str, str] = {}       # case key -> the GPU model its subjects run on
        errors: list[BaseException] = []
        threads = [threading.Thread(target=self._lane_thread, args=(lane, gpu, queue, pinned, errors, durations),
                                    daemon=True)
                   for lane, gpu in zip(self.lanes, self.gpus)]
        self.launch()
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                while thread.is_alive():
                    thread.join(0.2)
            starts = self._after_lanes(errors, queue, pinned, durations)
        except KeyboardInterrupt:
            self._stop.set()
            self.close()
            raise
        for position, s in list(queue):  # left when every lane of its GPU model failed to start
            self._record(self._lost(s, {}, f"no worker could start on a {pinned.get(s.case.key, 'GPU')}: "
                                           + "; ".join(e.message for e in starts)), position)
        queue.clear()

    def _after_lanes(self, errors: list, queue: list, pinned: dict[str, str], durations: Durations) -> list:
        """Raise the lanes' errors (start errors only if no lane started); serve what a failed lane gave back."""
        other = [e for e in errors if not isinstance(e, WorkerStartError)]  # a Ctrl-C first
        if other:
            raise next((e for e in other if isinstance(e, KeyboardInterrupt)), other[0])
        starts = [e for e in errors if isinstance(e, WorkerStartError)]
        if starts and len(starts) == len(self.lanes):
            raise starts[0]  # no GPU could start a worker: the same error as on one GPU
        for lane, gpu in zip(self.lanes, self.gpus):
            if queue and lane not in self._failed:
                try:
                    self._serve(lane, queue, pinned, lane.model(gpu), durations)
                except WorkerStartError as error:
                    starts.append(error)
        return starts

    def _lane_thread(self, lane: Lane, gpu: Optional[Gpu], queue: list, pinned: dict[str, str],
                     errors: list, durations: Durations) -> None:
        with self._lock:
            self._active.add(lane)
        try:
            lane.ready()
            self._serve(lane, queue, pinned, lane.model(gpu), durations)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread, which re-raises
            if not self._stop.is_set():
                errors.append(exc)
                if isinstance(exc, WorkerStartError):
                    self._failed.add(lane)
                else:
                    self._stop.set()
        finally:
            with self._lock:
                self._active.discard(lane)

    def _serve(self, lane: Lane, queue: list, pinned: Optional[dict[str, str]] = None, model: str = "",
               durations: Optional[Durations] = None) -> None:
        """Run subjects from the queue on this lane until it is empty (or holds only subjects pinned
        to another GPU model). While the worker judges one subject, the next one's request already
        waits in its channel (`_send_ahead`): the worker goes on to it at once, and this side records
        the result meanwhile."""
        ahead: Optional[tuple[int, Planned]] = None  # taken, its request sent, its answer not yet read
        while not self._stop.is_set():
            sent = ahead is not None
            taken = ahead if ahead is not None else self._take(lane, queue, pinned, model)
            if taken is None:
                return
            planned, s = taken
            try:
                result, ahead = self._attempt(lane, s, sent, (queue, pinned, model))
            except WorkerStartError:
                self._give_back(lane, queue, (planned, s))  # this lane's worker cannot start again
                raise
            if self._stop.is_set():
                return  # interrupted: what the killed worker said is not a result
            if durations is not None:
                durations.note(s, result)
            self._record(result, planned)

    def _take(self, lane: Lane, queue: list, pinned: Optional[dict[str, str]], model: str,
              ahead: bool = False) -> Optional[tuple[int, Planned]]:
        """The first subject of the queue this lane may run (its GPU model), preferring one whose random
        shapes no other lane's judge is checking now. `ahead`: none unless that subject's request can go
        at once (a baseline, or a variant whose family the lane's worker holds), so the order stays."""
        with self._lock:
            chosen = fallback = None
            for i, (_, s) in enumerate(queue):
                if pinned is not None and pinned.get(s.case.key, model) != model:
                    continue
                if not self._shapes.elsewhere(s, lane):
                    chosen = i
                    break
                fallback = i if fallback is None else fallback
            index = chosen if chosen is not None else fallback
            if index is None:
                return None
            s = queue[index][1]
            if ahead and s.role == "variant" and not lane.can_send(s.family):
                return None
            planned, s = queue.pop(index)
            if pinned is not None:
                pinned.setdefault(s.case.key, model)
            self._shapes.claim(s, lane)
            return planned, s

    def _give_back(self, lane: Lane, queue: list, taken: tuple[int, Planned]) -> None:
        with self._lock:
            queue.insert(0, taken)
        self._shapes.release(taken[1], lane)

    def _send_ahead(self, lane: Lane, queue: list, pinned: Optional[dict[str, str]],
                    model: str) -> Optional[tuple[int, Planned]]:
        """The next subject for this lane, its request sent now, behind the one the worker serves. With
        several lanes only while every lane still in the run is busy (one that is free or still starting
        takes the next subject itself: the longest first; one whose worker could not start has left) and
        not for the last two subjects a lane, so that no lane holds two while another has none."""
        if self._stop.is_set() or not lane.can_send():
            return None
        if len(self.lanes) > 1:
            with self._lock:
                if not self._active <= self._busy or len(queue) <= 2 * len(self.lanes):
                    return None
        taken = self._take(lane, queue, pinned, model, ahead=True)
        if taken is not None:
            lane.send(self._request(taken[1]))
        return taken

    def _request(self, s: Planned) -> dict[str, Any]:
        return subject_request(s, self.options, self.seed, self._shapes.for_request(s))

    def _attempt(self, lane: Lane, s: Planned, sent: bool = False,
                 more: Optional[tuple[list, Optional[dict[str, str]], str]] = None
                 ) -> tuple[Result, Optional[tuple[int, Planned]]]:
        """One subject's result, and the next subject whose request went ahead of its answer (from the
        queue `more` gives, if any). `sent`: this one's request went ahead already."""
        try:
            return self._judged(lane, s, sent, more)
        finally:
            self._shapes.release(s, lane)

    def _judged(self, lane: Lane, s: Planned, sent: bool,
                more: Optional[tuple[list, Optional[dict[str, str]], str]]) -> tuple[Result, Optional[tuple[int, Planned]]]:
        if not sent and s.role == "variant":
            failure = self._build(lane, s.family)
            if failure:
                return Result(s.case, s.name, s.role, skipped=f"build failed: {failure}"), None
        if not sent:
            lane.ready()
            if more is not None and lane.can_send():
                lane.send(self._request(s))
                sent = True
        worker, ahead = lane.worker, None
        with self._lock:
            self._busy.add(lane)
        try:
            if sent and more is not None:
                ahead = self._send_ahead(lane, *more)
            lane.on_status(f"{s.case.key}: {s.name}")
            result = lane.subject(self._request(s) if not sent else {}, self.options.timeout,
                                  lambda reason: self._lost(s, lane.where(), reason), sent=sent)
        finally:
            with self._lock:
                self._busy.discard(lane)
        self._shapes.note(s, result)
        if ahead is not None and lane.worker is not worker:  # replaced: what went ahead went with it
            self._give_back(lane, more[0], ahead)  # type: ignore[index]
            ahead = None
        return result, ahead

    def _build(self, lane: Lane, family: str) -> str:
        """'' once the family is built in this lane's worker, else why not (remembered for the run:
        the sources are the same on every GPU). The first lane to need a family builds it alone; the
        others wait for it, then load it from the cache side by side, not one after another (each
        load may wait for its lane's subject process to start: seconds, for each GPU in turn)."""
        with self._lock:
            lock = self._build_locks.setdefault(family, threading.Lock())
        with lock:
            if family in self._build_failures:
                return self._build_failures[family]
            if family not in self._built:
                failure = lane.build(family, self.options.arch)
                if failure:
                    self._build_failures[family] = failure
                else:
                    self._built.add(family)
                return failure
        return lane.build(family, self.options.arch)

    @staticmethod
    def _lost(s: Planned, where: dict[str, Any], reason: str) -> Result:
        return Result(s.case, s.name, s.role, error=reason, **where)

    def _record(self, result: Result, planned: int = -1) -> None:
        if result.subject in self.options.renames:
            result = dataclasses.replace(result, subject=self.options.renames[result.subject])
        with self._lock:
            self.results.append(result)
            self._positions.append(planned)
        with self._report:  # outside the queue's lock: the other lanes go on taking subjects meanwhile
            self.on_result(result)

