"""Results as plain data: a versioned JSON document with every sample, written atomically."""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable, Optional

from cudabench.model import Environment, Result

SCHEMA = "cudabench.results"
SCHEMA_VERSION = 1


def result_to_dict(r: Result) -> dict[str, Any]:
    d: dict[str, Any] = {
        "case": {"family": r.case.family, "shape": r.case.params, "direction": r.case.direction,
                 "dtype": r.case.dtype, "key": r.case.key()},
        "subject": r.subject,
        "role": r.role,
        "status": r.status,
        "skipped": r.skipped or None,
        "flops": r.flops,
        "bytes": r.bytes,
        "check": None,
        "stats": None,
        "measurement": None,
    }
    if r.check is not None:
        d["check"] = {"errors": dict(r.check.errors), "tolerance": r.check.tolerance,
                      "passed": r.check.passed}
    if r.stats is not None:
        d["stats"] = {**dataclasses.asdict(r.stats), "iqr": r.stats.iqr, "noise": r.stats.noise}
    if r.measurement is not None:
        m = r.measurement
        d["measurement"] = {
            "timing": m.timing, "cache": m.cache, "unit": "seconds per call",
            "warmup_calls": m.warmup_calls, "warmup_seconds": m.warmup_seconds,
            "stop_reason": m.stop_reason, "calls_per_sample": m.calls_per_sample,
            "clocks": dict(m.clocks), "extra": dict(m.extra), "samples": list(m.samples),
        }
    return d


def document(results: Iterable[Result], env: Environment, command: str = "",
             seed: Optional[int] = None) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "command": command,
        "seed": seed,
        "environment": {**dataclasses.asdict(env), "settings": dict(env.settings)},
        "results": [result_to_dict(r) for r in results],
    }


def _clean(value: Any) -> Any:
    """JSON has no NaN/inf: write them as strings so the file stays standard JSON."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return str(value)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write to a temporary file beside `path`, then rename over it: readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(_clean(data), f, indent=1)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
