"""Results as plain data: a versioned JSON document with every sample, written atomically, and
its CSV and Markdown renderings.

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

Writers follow symlinks and replace the target atomically (a symlink stays a symlink), refuse folders,
devices and FIFOs, and take "-" (or /dev/stdout) for standard output, written directly.
Readers go through cudabench.files: a regular file of bounded size, parse failures as one message.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import math
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

from cudabench import __version__
from cudabench.errors import ConfigError
from cudabench.files import STDOUT_PATHS, check_outputs, output_target, parse_json, read_input
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


# ---- writing -------------------------------------------------------------------------------------

def writes_to_stdout(path: Optional[Path | str]) -> bool:
    """True for the paths that mean standard output: '-' and /dev/stdout."""
    return path is not None and str(path) in STDOUT_PATHS


def check_output_path(path: Optional[Path | str]) -> None:
    """Fail before any work when `path` can never be written (cudabench.files.check_outputs)."""
    check_outputs([path])


def write_json_atomic(path: Path | str, data: dict[str, Any]) -> None:
    write_text_atomic(path, json.dumps(json_safe(data), indent=1) + "\n")


def write_text_atomic(path: Path | str, text: str) -> None:
    """Write UTF-8 text; see write_bytes_atomic."""
    if writes_to_stdout(path):
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: Path | str, data: bytes) -> None:
    """Write to a temporary file beside the target, then rename over it: readers never see half a
    file. '-' (or /dev/stdout) writes to standard output directly. ConfigError when it cannot."""
    if writes_to_stdout(path):
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    target = output_target(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    except OSError as exc:
        raise ConfigError(f"Cannot write {path}: {exc.strerror or exc}.", "Give a file path in a writable folder.") from None
    try:
        os.chmod(tmp, _file_mode(target))  # mkstemp makes it private; a results file is an ordinary file
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    except OSError as exc:  # e.g. the disk is full
        Path(tmp).unlink(missing_ok=True)
        raise ConfigError(f"Cannot write {path}: {exc.strerror or exc}.") from None
    except BaseException:   # an interrupt: leave no temporary file behind
        Path(tmp).unlink(missing_ok=True)
        raise


def _file_mode(target: Path) -> int:
    """Keep a replaced file's permissions; a new one gets what the umask allows."""
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


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


# ---- CSV and Markdown ----------------------------------------------------------------------------

COLUMNS = ("family", "shape", "direction", "dtype", "subject", "role", "status", "rel_error", "median", "ci_low",
           "ci_high", "q1", "q3", "min", "mean", "stdev", "n", "kernel_time", "kernels_per_call", "tflops", "gbps",
           "ceiling", "peak_memory", "timing", "cache", "skipped")
TIME_COLUMNS = ("median", "ci_low", "ci_high", "q1", "q3", "min", "mean", "stdev")  # ci: the median's 95 %


def _number(value: Any) -> Optional[float]:
    return None if value is None else float(value)  # float() also reads the "nan"/"inf" strings


def _count(value: Any) -> Optional[float | int]:
    """A count stored as a float in measurement.extra: 2.0 reads 2, a fractional mean stays as it is."""
    number = _number(value)
    return int(number) if number is not None and number.is_integer() else number


def memory_of(result: Mapping[str, Any]) -> Optional[int]:
    """A result's peak memory in bytes, None when it was not measured."""
    value = result.get("peak_memory", -1)
    return None if value is None or int(value) < 0 else int(value)


def _worst_error(check: Optional[Mapping[str, Any]]) -> Optional[float]:
    errors = [float(e) for e in ((check or {}).get("errors") or {}).values()]
    if not errors:
        return None
    return math.nan if any(e != e for e in errors) else max(errors)


def _why(r: Mapping[str, Any]) -> str:
    """Why a result is not a trusted figure: its skip reason, its error, or its failed integrity checks."""
    failed = [f"{i.get('name')}: {i.get('detail')}" for i in (r.get("integrity") or []) if isinstance(i, dict)
              and i.get("verdict") == "fail"]
    return r.get("skipped") or r.get("error") or "; ".join(failed)


def _rate(amount: Any, seconds: Optional[float], unit: float) -> Optional[float]:
    amount = _number(amount)
    return amount / seconds / unit if amount and seconds else None


def flat_rows(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One flat record per result, keyed by COLUMNS; times in seconds (kernel_time: the GPU kernels'
    own time per call, from CUPTI), None where not measured. tflops and gbps are the family's count
    over the kernel time where CUPTI measured it (as the table), else over the median; ceiling is the
    share of the device ceiling that bounds the family (0.5 for 50 %)."""
    rows = []
    for r in doc.get("results", []):
        case, stats, m = r["case"], r.get("stats") or {}, r.get("measurement") or {}
        extra = m.get("extra") or {}
        row = {"family": case["family"], "shape": ",".join(f"{k}={v}" for k, v in case["shape"].items()),
               "direction": case["direction"], "dtype": case.get("dtype", "float32"), "subject": r["subject"],
               "role": r.get("role"),
               "status": r.get("status"), "rel_error": _worst_error(r.get("check")), "n": stats.get("n"),
               "kernel_time": _number(extra.get("kernel_time_cupti")),
               "kernels_per_call": _count(extra.get("kernels_per_call")),
               "peak_memory": memory_of(r),
               "timing": m.get("timing"), "cache": m.get("cache"), "skipped": _why(r)}
        row.update({c: _number(stats.get(c)) for c in TIME_COLUMNS})
        seconds = row["kernel_time"] or row["median"]
        row.update(tflops=_rate(r.get("flops"), seconds, 1e12), gbps=_rate(r.get("bytes"), seconds, 1e9),
                   ceiling=_number(extra.get("ceiling_fraction")))
        rows.append(row)
    return rows


def to_csv(doc: Mapping[str, Any]) -> str:
    """A header and one row per result; times in seconds (full precision), empty where not measured."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in flat_rows(doc):
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return buffer.getvalue()


def markdown_header(doc: Mapping[str, Any]) -> str:
    env = doc.get("environment") or {}
    gpu = env.get("gpu") or "no GPU"
    if env.get("capability"):
        gpu += f" (sm_{env['capability'].replace('.', '')})"
    parts = [f"**GPU** {gpu}", f"**driver** {env.get('driver') or '-'}",
             f"**CUDA** {env.get('cuda_runtime') or '-'}", f"**torch** {env.get('torch') or '-'}",
             f"**cudabench** {env.get('cudabench') or '-'}", f"**date** {env.get('date') or '-'}"]
    line = " · ".join(parts)
    return line + (f"  \n`{doc['command']}`" if doc.get("command") else "")


def _rates(row: Mapping[str, Any]) -> list[str]:
    """TFLOP/s, GB/s and % ceiling as the table shows them."""
    tflops, gbps, ceiling = row["tflops"], row["gbps"], row["ceiling"]
    return ["-" if tflops is None else f"{tflops:.2f}", "-" if gbps is None else f"{gbps:.0f}",
            "-" if ceiling is None else f"{ceiling:.0%}"]


UNTRUSTED = ("INVALID", "ERROR")  # statuses whose figures are not results


def to_markdown(doc: Mapping[str, Any]) -> str:
    """A GitHub table of the results under a line with GPU, driver, CUDA, torch and date."""
    from cudabench.results.report import fmt_bytes, fmt_error, fmt_time

    head = ["family", "shape", "dir", "dtype", "subject", "role", "status", "rel err", "median", "ci low", "ci high", "q1",
            "q3", "min", "mean", "stdev", "n", "kernel time", "kernels/call", "TFLOP/s", "GB/s", "% ceiling",
            "peak memory", "timing", "cache"]
    numeric = (*TIME_COLUMNS, "ci low", "ci high", "n", "rel err", "kernel time", "kernels/call", "TFLOP/s", "GB/s",
               "% ceiling", "peak memory")
    lines = [markdown_header(doc), "", "| " + " | ".join(head) + " |",
             "|" + "|".join("---:" if h in numeric else "---" for h in head) + "|"]
    for row in flat_rows(doc):
        err, per_call = row["rel_error"], row["kernels_per_call"]
        figures = [*(fmt_time(row[c]) for c in TIME_COLUMNS), "-" if row["n"] is None else str(row["n"]),
                   fmt_time(row["kernel_time"]), "-" if per_call is None else f"{per_call:g}", *_rates(row)]
        if row["status"] in UNTRUSTED:  # kept for the record, struck through: never read as a result
            figures = [f"~~{f}~~" if f not in ("", "-") else f for f in figures]
        cells = [row["family"], row["shape"], row["direction"], row["dtype"], row["subject"], row["role"], row["status"],
                 "-" if err is None else fmt_error(err), *figures, fmt_bytes(row["peak_memory"]),
                 row["timing"] or "-",
                 row["cache"] or "-"]
        lines.append("| " + " | ".join(str(c or "-").replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"
