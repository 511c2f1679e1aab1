"""What a Dask worker runs for a run on a cluster (cudabench.engine.cluster): the tasks that start its
cudabench worker and run one subject there. Each Dask worker keeps one lane (one isolated cudabench
worker process, with the Dask worker's CUDA_VISIBLE_DEVICES) between tasks and runs; a later run greets
it again, and an edit of a source or spec.py starts a fresh one."""

from __future__ import annotations

import atexit
import json
import threading
from pathlib import Path
from typing import Any, Optional, Sequence

from cudabench.engine.lane import Lane
from cudabench.engine.sealed import seal
from cudabench.engine.workers import ProcessWorker, worker_command
from cudabench.errors import CudabenchError
from cudabench.results.exporters.json_document import case_from_dict, result_to_dict
from cudabench.results.records.model import Result

_LANES: dict[str, Lane] = {}
_RUN_OF: dict[str, str] = {}   # lane key -> the run it serves now
_LANES_LOCK = threading.Lock()


def _lane(hello: dict[str, Any], command: Sequence[str], run: str) -> Lane:
    """This Dask worker's lane for a run's hello: one cudabench worker process (with the Dask worker's
    CUDA_VISIBLE_DEVICES), kept for later tasks; a later run greets it again (Lane.next_run)."""
    key = json.dumps([hello, list(command), _sources_stamp(hello)], sort_keys=True)
    if key not in _LANES:
        for old in _LANES.values():  # another run's worker: one GPU, one worker
            old.close()
        _LANES.clear()
        seal()  # this Dask worker holds the pipes to its cudabench worker (docs/trust.md)
        argv = list(command) or worker_command(keep_spare=True)  # by default this node's own Python
        _LANES[key] = Lane(lambda: ProcessWorker(argv), hello)
    elif _RUN_OF.get(key) != run:
        _LANES[key].next_run()
    _RUN_OF[key] = run
    return _LANES[key]


def _sources_stamp(hello: dict[str, Any]) -> list[tuple[str, int, int]]:
    """Path, size and mtime of each source and spec.py this node would load (an edit: a fresh worker)."""
    from cudabench.spec.registry import builtin_kernels_dir

    roots = [builtin_kernels_dir(), *map(Path, hello.get("kernels_dirs", ()))]
    stamp = []
    for root in roots:
        for path in sorted(root.rglob("*")) if root.is_dir() else ():
            if path.is_file() and path.suffix in (".py", ".cu", ".cpp", ".h", ".cuh", ".hpp"):
                info = path.stat()
                stamp.append((str(path), info.st_size, info.st_mtime_ns))
    return stamp


@atexit.register
def _close_lanes() -> None:
    for lane in _LANES.values():
        lane.close()


def worker_environment(hello: dict[str, Any], command: Sequence[str], run: str) -> dict[str, Any]:
    """A Dask task: start this node's cudabench worker and say what it runs on."""
    with _LANES_LOCK:
        lane = _lane(hello, command, run)
        lane.ready()
        return {"environment": lane.environment, "ceilings": lane.ceilings}


def run_subject(hello: dict[str, Any], command: Sequence[str], run: str, build: Optional[dict[str, Any]],
                request: dict[str, Any], timeout: float) -> dict[str, Any]:
    """A Dask task: one subject in this node's isolated cudabench worker. Returns the result as a
    dict and the seconds waited for the worker's start and builds."""
    with _LANES_LOCK:
        lane = _lane(hello, command, run)
        before = dict(lane.waited)
        name, role = request["subject"], request["role"]

        def lost(reason: str) -> Result:
            return Result(case_from_dict(request["case"]), name, role, error=reason, **lane.where())

        try:
            lane.ready()
        except CudabenchError as exc:
            result = lost(f"the worker could not start on {lane.where()['host'] or 'this node'}: {exc.message}")
        else:
            failure = lane.build(build["family"], build.get("arch")) if build else ""
            if failure:
                result = Result(case_from_dict(request["case"]), name, role, skipped=f"build failed: {failure}",
                                **lane.where())
            else:
                result = lane.subject(request, timeout, lost)
        return {"result": result_to_dict(result),
                "waited": {k: lane.waited[k] - before.get(k, 0.0) for k in lane.waited}}
