"""Baselines kept from an earlier run (`run --baselines-from FILE`, and `watch` from its second turn):
a baseline is PyTorch's code, which an edit of a kernel does not change, so a figure measured minutes
ago on the same GPU, torch, family sources and settings is as good as a new one, and re-measuring it
on every save is most of a watch turn (conv1d's backward at the seed shape: 2 of 3 s).

A result is kept only when all of these hold, and measured again otherwise:
  - the earlier result is a baseline's, at the same case (shape, direction, dtype, inputs), and ok
    (checked, every integrity check passed);
  - it ran on this run's GPU (UUID), and the earlier run had the same driver, torch and cudabench;
  - under the same settings (timing, cache, integrity, fuzz, TF32);
  - with the same source hash of the family (its spec.py defines the baseline).
A kept result is the earlier one with its phases cleared (its time was spent in the earlier run) and
`kept` set in its measurement's extra figures; the run says which it kept."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

from cudabench.results.records.model import Result

KEPT = "kept"  # the measurement's extra figure that marks a kept result
SAME_ENVIRONMENT = ("gpu_uuid", "driver", "torch", "cudabench", "settings")


def kept_results(entries: Any, hashes: dict[str, str], environment: dict[str, Any],
                 earlier: dict[str, Any]) -> dict[int, Result]:
    """Plan position -> the earlier result kept for that baseline entry (see the module's rules).
    `environment` and `earlier` in the results file's form (`earlier`: as load_results read it)."""
    from cudabench.results.exporters.json_document import result_from_dict

    before = earlier.get("environment") or {}
    if any(before.get(key) != environment.get(key) for key in SAME_ENVIRONMENT):
        return {}
    earlier_hashes = earlier.get("source_hashes") or {}
    found: dict[tuple[str, str], dict] = {}
    for data in earlier["results"]:
        try:
            if data["role"] == "baseline" and data.get("status") == "ok" and \
                    data.get("gpu_uuid") == environment.get("gpu_uuid"):
                found[(data["case"]["key"], data["subject"])] = data
        except (KeyError, TypeError):
            continue
    kept: dict[int, Result] = {}
    for position, entry in enumerate(entries):
        if entry.role != "baseline" or entry.skipped:
            continue
        family = entry.case.family
        if not hashes.get(family) or earlier_hashes.get(family) != hashes.get(family):
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
