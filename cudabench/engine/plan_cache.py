"""Plans kept between invocations. A run asked again (the same kernels, shape, suite and options, over
unchanged kernel folders, cudabench, Python, torch and environment) runs the plan it made before,
without importing any family's spec.py: each imports torch, about 3 s on the H100 machine, which was
most of a warm run's wall time. A plan is kept only once this machine could run it (the request was
valid and a GPU was there); a mistake is never kept, so it is reported every time.

What the key reads is what planning reads: each kernels folder's family folders, every file in them by
content (a spec.py that changes its variants or shapes, a source whose hash the results record), and
what worker_key reads (cudabench's own files, the Python, torch's version, the environment). A spec.py
that plans from files outside its folder is not covered; `CUDABENCH_PLAN_CACHE=0` plans every time."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Optional, Sequence

from cudabench.engine.plan import PlannedRun
from cudabench.engine.warm_client import worker_key
from cudabench.errors import CudabenchError
from cudabench.outputs import write_text_atomic
from cudabench.results.records.codec import from_data, to_data
from cudabench.spec.build import cache_root
from cudabench.spec.registry import builtin_kernels_dir


def family_files_digest(roots: Sequence[Path]) -> str:
    """sha256 over every file of every family folder (one with a spec.py) under these folders."""
    h = hashlib.sha256()
    for root in roots:
        if not root.is_dir():
            continue  # planning reports it
        for folder in sorted(p for p in root.iterdir() if (p / "spec.py").is_file()):
            for path in sorted(folder.rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def plan_key(kernels_dirs: Sequence[Any], kernels: Optional[Sequence[str]], shapes: Sequence[dict[str, int]],
             config: Optional[Path], options: Any) -> str:
    roots = [builtin_kernels_dir(), *(Path(d) for d in kernels_dirs)]
    parts = {"worker": worker_key(kernels_dirs, dict(os.environ)), "families": family_files_digest(roots),
             "kernels": list(kernels or ()), "shapes": list(shapes),
             "config": hashlib.sha256(Path(config).read_bytes()).hexdigest() if config else None,
             "options": [options.directions, options.baselines, options.inputs, options.dtypes]}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


def _path(key: str) -> Path:
    return cache_root() / "plans" / f"{key}.json"


def cached_plan(key: str) -> Optional[PlannedRun]:
    """The plan kept under this key, or None (none kept, turned off, or unreadable: planned again)."""
    if os.environ.get("CUDABENCH_PLAN_CACHE", "1") == "0":
        return None
    try:
        return from_data(PlannedRun, json.loads(_path(key).read_text()))
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def keep_plan(key: str, planned: PlannedRun) -> None:
    try:
        write_text_atomic(_path(key), json.dumps(to_data(planned)))
    except (OSError, CudabenchError):
        pass  # a read-only cache only costs the next run its planning
