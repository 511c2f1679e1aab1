"""What run and check share: the runner that executes their subjects (one warm or fresh worker per
GPU, or a Dask cluster), the GPUs --gpus names, --fuzz's extra shapes, and when a run failed."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any, Optional


def start_runner(options: Any, kernels_dirs: Any, settings: Optional[dict] = None, gpus: Any = (),
                 cluster: Optional[str] = None, warm: Optional[bool] = None):
    """A Runner with one worker per GPU of `gpus` (none: the default GPU): the GPU's warm worker
    (cudabench.engine.warm), started if none runs, or with `warm` False a fresh
    `python -m cudabench.engine.worker` process; or on the Dask cluster at `cluster`."""
    if cluster:
        from cudabench.engine.cluster import ClusterRunner

        return ClusterRunner(cluster, options, kernels_dirs, settings)
    from cudabench.engine.scheduler import Runner
    from cudabench.engine.warm_client import SocketWorker, warm_by_default, worker_idle
    from cudabench.engine.workers import ProcessWorker, worker_command

    warm = warm_by_default() if warm is None else warm

    def start(gpu):
        env = {**os.environ, **gpu.env()} if gpu is not None else dict(os.environ)
        if warm:
            return SocketWorker(gpu, kernels_dirs or (), env, idle=worker_idle())
        return ProcessWorker(worker_command(), env=env)

    return Runner(options, start, kernels_dirs, settings, gpus=gpus)


def gpus_of(spec: Optional[str]) -> list:
    """The GPUs --gpus names (nothing: the default GPU alone)."""
    if not spec:
        return []
    from cudabench.engine.gpus import detect, select

    return select(spec, detect())


def fuzz_tasks(reg: Any, tasks: list, count: int, options: Any, seed: Optional[int]) -> list:
    """`check --fuzz N`: each planned variant again at N random shapes within its constraints."""
    import random

    from cudabench.engine.plan import plan
    from cudabench.spec.fuzz import random_shapes

    if count <= 0:
        return []
    rng = random.Random(seed)
    extra = []
    for task in tasks:
        for variant in task.variants:
            for shape in random_shapes(task.family, variant, count, rng):
                extra += plan(reg, [variant.name], shape, replace(options, baselines=()))
    return extra


def failed(results: list) -> bool:
    return any(r.status != "ok" and not r.skipped.startswith(("constraint", "dtype")) for r in results)
