"""Starting the runner of a run (`cudabench run`, `check`, and the Python API): one worker per GPU, the
GPU's warm worker or a fresh process, or the GPU workers of a Dask cluster."""

# Each kind of runner (a local scheduler, warm workers, a Dask cluster) is imported only when chosen.

from __future__ import annotations

import os
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
