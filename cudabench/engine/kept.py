"""Baselines kept from an earlier run (`run --baselines-from FILE`, and `watch` from its second turn):
a baseline is PyTorch's code, which an edit of a kernel's CUDA sources does not change, so a figure
measured minutes ago under the same conditions is as good as a new one, and re-measuring it on every
save was most of a watch turn (conv1d's backward at the seed shape: 2 of 3 s).

A result is kept only when all of these hold, and measured again otherwise:
  - the earlier result is a baseline's, at the same case (shape, direction, dtype, inputs), and ok
    (checked, every integrity check passed);
  - it ran on this run's GPU (a known UUID), the run has one GPU and renames nothing, and the earlier
    run had the same driver, torch and cudabench;
  - both runs have the same settings, among them `baselines-key` (baselines_key): the run's options
    (timer, stop rule, warm-up, integrity, ...), cudabench's own files, and the Python and JSON files
    of the kernels folders (spec.py defines the baselines; an edit of one keeps nothing).
A kept result is the earlier one with its phases cleared (its time was spent in the earlier run) and
`kept` set in its measurement's extra figures; the run says which it kept."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional, Sequence

from cudabench.results.records.model import Result

KEPT = "kept"  # the measurement's extra figure that marks a kept result
KEY = "baselines-key"  # the settings entry baselines_key fills
SAME_ENVIRONMENT = ("gpu_uuid", "driver", "torch", "cudabench", "settings")


def baselines_key(options: Any, kernels_dirs: Sequence[Any]) -> str:
    """A digest of what a baseline's figure depends on beside its case and environment."""
    from cudabench.engine.durations import run_context
    from cudabench.engine.warm_client import package_stamp
    from cudabench.spec.registry import builtin_kernels_dir

    h = hashlib.sha256(json.dumps([run_context(options), package_stamp()]).encode())
    for root in sorted({Path(d).resolve() for d in [builtin_kernels_dir(), *kernels_dirs]}):
        for path in sorted(root.rglob("*")) if root.is_dir() else []:
            if path.suffix in (".py", ".json") and "__pycache__" not in path.parts and path.is_file():
                h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def read_earlier(path: Path, digest: Optional[str]) -> tuple[Optional[dict[str, Any]], str]:
    """(the results document at `path`, validated; or None and why). Read once: with `digest` (watch:
    the sha256 of what its previous turn's run wrote), the bytes checked are the bytes parsed, and a
    file changed since, by anything running as this user (a kernel's process among them), keeps nothing."""
    from cudabench.files import read_input
    from cudabench.results.exporters.json_document import RESULTS_FILE, results_from_bytes

    data = read_input(path, RESULTS_FILE)
    if digest and hashlib.sha256(data).hexdigest() != digest:
        return None, "it changed on disk after its run wrote it"
    return results_from_bytes(data, path), ""


def kept_results(entries: Any, environment: dict[str, Any], earlier: dict[str, Any]) -> dict[int, Result]:
    """Plan position -> the earlier result kept for that baseline entry (see the module's rules).
    `environment` and `earlier` in the results file's form (`earlier`: as load_results read it)."""
    from cudabench.results.exporters.json_document import result_from_dict

    before = earlier.get("environment") or {}
    here = environment.get("gpu_uuid")
    if not here or not dict(environment.get("settings") or {}).get(KEY) or \
            any(before.get(key) != environment.get(key) for key in SAME_ENVIRONMENT):
        return {}
    found: dict[tuple[str, str], dict] = {}
    for data in earlier["results"]:
        try:
            if data["role"] == "baseline" and data.get("status") == "ok" and data.get("gpu_uuid") == here:
                found[(data["case"]["key"], data["subject"])] = data
        except (KeyError, TypeError):
            continue
    kept: dict[int, Result] = {}
    for position, entry in enumerate(entries):
        if entry.role != "baseline" or entry.skipped:
            continue
        data = found.get((entry.case.key, entry.name))
        result = _as_kept(result_from_dict(data)) if data is not None else None
        if result is not None and result.case == entry.case:
            kept[position] = result
    return kept


def _as_kept(result: Result) -> Optional[Result]:
    if result.measurement is None or result.status != "ok":
        return None
    extra = tuple(pair for pair in result.measurement.extra if pair[0] != KEPT) + ((KEPT, 1.0),)
    return replace(result, phases=(), measurement=replace(result.measurement, extra=extra))


def is_kept(result: Result) -> bool:
    return result.measurement is not None and dict(result.measurement.extra).get(KEPT) == 1.0
