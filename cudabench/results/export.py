"""Results as plain data: a versioned JSON document with every sample, its codec, and its reading back
(the CSV, Markdown and HTML renderings are cudabench.results.csv_format, .markdown and .html).

Schema "cudabench.results", version 2 (a reader refuses other names and versions, reads 1 too, and checks
every field against cudabench.results.schema):

    schema, schema_version, command, seed, complete (false while the run is going, and for a run
                    ended early by Ctrl-C: some planned subjects are missing)
    environment     gpu, gpu_index, gpu_uuid, capability, sm_count, l2_bytes, memory_bytes, driver, cuda_runtime, torch,
                    python, cudabench, hostname, date (UTC, ISO 8601), settings {name: value}
    source_hashes   {family: sha256 of its sources and cudabench's shared headers}
    results[]       case {family, shape {param: int}, direction, dtype, inputs, key}, subject, role
                    (variant | baseline), status (ok | SKIP | FAIL | ERROR | INVALID), skipped
                    (reason or null), error (the crash, hang or exception's own text, or null),
                    host, gpu, gpu_index, gpu_uuid (where it ran), integrity [{name, verdict (pass | fail | not run),
                    detail}], peak_memory (bytes one call allocated beyond what was allocated before
                    it, through PyTorch's allocator; -1 when not measured), flops, bytes, check {errors {output: rel error}, tolerance, passed} | null,
                    stats {n, median, q1, q3, min, max, mean, stdev, iqr, noise, ci_low, ci_high,
                    precision (half the median's 95 % interval over the median)} | null,
                    measurement {timing, cache, unit, warmup_calls, warmup_seconds, stop_reason,
                    calls_per_sample, clocks, extra, samples[]} | null

Version 2 added error, integrity, host and gpu (absent in version 1 files); stats.ci_low, ci_high and
precision, the result's phases {name: seconds}, gpu_index, gpu_uuid, peak_memory and the document's complete came
later in version 2 (absent in earlier version 2 files; readers treat them as unknown: index -1, UUID "", memory -1,
complete true). Times are seconds per call. JSON has no NaN or infinity: they are written as "nan", "inf", "-inf".

Files are written by cudabench.outputs; readers go through cudabench.files: a regular file of bounded size, parse failures as one message.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

from cudabench import __version__
from cudabench.errors import ConfigError
from cudabench.files import parse_json, read_input
from cudabench.outputs import write_text_atomic
from cudabench.results.model import Case, Check, Environment, IntegrityCheck, Measurement, Result, Stats
from cudabench.spec.family import Family

SCHEMA = "cudabench.results"
SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)


def result_to_dict(r: Result) -> dict[str, Any]:
    d: dict[str, Any] = {
        "case": {"family": r.case.family, "shape": r.case.params, "direction": r.case.direction,
                 "dtype": r.case.dtype, "inputs": r.case.inputs, "key": r.case.key()},
        "subject": r.subject,
        "role": r.role,
        "status": r.status,
        "skipped": r.skipped or None,
        "error": r.error or None,
        "host": r.host,
        "gpu": r.gpu,
        "gpu_index": r.gpu_index,
        "gpu_uuid": r.gpu_uuid,
        "integrity": [dataclasses.asdict(c) for c in r.integrity],
        "phases": dict(r.phases),
        "peak_memory": r.peak_memory,
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
        d["stats"] = {**dataclasses.asdict(r.stats), "iqr": r.stats.iqr, "noise": r.stats.noise,
                      "precision": r.stats.precision}
    if r.measurement is not None:
        d["measurement"] = measurement_to_dict(r.measurement)
    return d


def measurement_to_dict(m: Measurement) -> dict[str, Any]:
    return {"timing": m.timing, "cache": m.cache, "unit": "seconds per call",
            "warmup_calls": m.warmup_calls, "warmup_seconds": m.warmup_seconds,
            "stop_reason": m.stop_reason, "calls_per_sample": m.calls_per_sample,
            "clocks": dict(m.clocks), "extra": dict(m.extra), "samples": list(m.samples)}


def measurement_from_dict(m: Mapping[str, Any]) -> Measurement:
    return Measurement(
        samples=tuple(map(float, m["samples"])), timing=m["timing"], warmup_calls=m["warmup_calls"],
        warmup_seconds=m["warmup_seconds"], stop_reason=m["stop_reason"], cache=m["cache"],
        calls_per_sample=m["calls_per_sample"], clocks=tuple((k, float(v)) for k, v in m["clocks"].items()),
        extra=tuple((k, float(v)) for k, v in m["extra"].items()))


def result_from_dict(d: Mapping[str, Any]) -> Result:
    """The inverse of result_to_dict (how a worker's result crosses the process boundary)."""
    case = Case.from_dict(d["case"])
    check = measurement = stats = None
    if d.get("check"):
        check = Check(tuple((k, float(v)) for k, v in d["check"]["errors"].items()), float(d["check"]["tolerance"]))
    if d.get("stats"):
        stats = Stats(**{f.name: d["stats"][f.name] for f in dataclasses.fields(Stats) if f.name in d["stats"]})
    if d.get("measurement"):
        measurement = measurement_from_dict(d["measurement"])
    return Result(case, d["subject"], d["role"], check=check, measurement=measurement, stats=stats,
                  skipped=d.get("skipped") or "", flops=float(d.get("flops", 0.0)), bytes=float(d.get("bytes", 0.0)),
                  error=d.get("error") or "", host=d.get("host", ""), gpu=d.get("gpu", ""),
                  gpu_index=int(d.get("gpu_index", -1)), gpu_uuid=d.get("gpu_uuid", ""),
                  integrity=tuple(IntegrityCheck(**i) for i in d.get("integrity", ())),
                  phases=tuple((k, float(v)) for k, v in (d.get("phases") or {}).items()),
                  peak_memory=int(d.get("peak_memory", -1)))


def document(results: Iterable[Result], env: Environment, command: str = "",
             seed: Optional[int] = None, source_hashes: Optional[Mapping[str, str]] = None,
             complete: bool = True) -> dict[str, Any]:
    """The whole results document; `source_hashes` maps family names to `source_hash(family)`;
    `complete` is False for the copies written while the run goes on and for an interrupted run."""
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "command": command,
        "seed": seed,
        "complete": complete,
        "environment": {**dataclasses.asdict(env), "settings": dict(env.settings)},
        "source_hashes": dict(source_hashes or {}),
        "results": [result_to_dict(r) for r in results],
    }


def source_hash(family: Family) -> str:
    """sha256 of the family's source files and cudabench's shared headers (what its build reads)."""
    from cudabench.spec.build import hashed_files

    h = hashlib.sha256()
    for path in hashed_files(family):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def json_safe(value: Any) -> Any:
    """JSON has no NaN/inf: write them as strings so the file stays standard JSON."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return str(value)
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def write_json_atomic(path: Path | str, data: dict[str, Any]) -> None:
    """The document as JSON (NaN and infinities as strings), written atomically (cudabench.outputs)."""
    write_text_atomic(path, json.dumps(json_safe(data), indent=1) + "\n")


# ---- reading --------------------------------------------------------------------------------------

RESULTS_FILE = "results file"  # what cudabench.files calls it in messages


def _not_results(path: Path | str, why: str) -> ConfigError:
    return ConfigError(f"{path} is not a cudabench results file: {why}.",
                       "Give a file written by `cudabench run --json PATH`.")


def check_document(doc: Any, path: Path | str) -> dict[str, Any]:
    """`doc` validated against the results schema (cudabench.results.schema) and normalised: every
    field present and typed, NaN strings as floats. ConfigError naming `path` (a file, or any label
    such as a stored run's) and the wrong field."""
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise _not_results(path, f'no "schema": "{SCHEMA}"')
    version = doc.get("schema_version")
    if type(version) is not int or version not in READABLE_VERSIONS:
        raise ConfigError(f"{path} has results schema version {version}; cudabench {__version__} reads "
                          f"version {', '.join(map(str, READABLE_VERSIONS))}.",
                          "Use the cudabench version that wrote it, or run the benchmark again.")
    from pydantic import ValidationError

    from cudabench.results import schema  # pydantic only where files are read, never in `run`

    try:
        return schema.normalised(doc)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {schema.describe(exc)}.",
                          f"This is not a results file as cudabench {__version__} writes them "
                          f"(schema {SCHEMA}, version {SCHEMA_VERSION}); run the benchmark again "
                          "with --json PATH.") from None
    except RecursionError:  # pydantic walks what it keeps; the JSON parser has already bounded the depth
        raise _not_results(path, "it nests too deeply") from None


def load_results(path: Path | str, allow_stdin: bool = False) -> dict[str, Any]:
    """Read (through cudabench.files: a regular file of bounded size, or `-` for standard input when
    `allow_stdin`) and validate a results document (see check_document)."""
    path = Path(path)
    label = "standard input" if str(path) == "-" else path
    return check_document(parse_json(read_input(path, RESULTS_FILE, allow_stdin), label, RESULTS_FILE), label)
