"""Results as plain data: a versioned JSON document with every sample, its codec, and its reading back
(the CSV, Markdown and HTML renderings are cudabench.results.exporters.csv_file, .markdown and .html).

Schema "cudabench.results", version 2 (a reader refuses other names and versions, reads 1 too, and checks
every field against cudabench.results.records.schema):

    schema, schema_version, command, seed, complete (false while the run is going, and for a run
                    ended early by Ctrl-C: some planned subjects are missing)
    environment     the Environment record
    source_hashes   {family: sha256 of its sources and cudabench's shared headers}
    results[]       the Result records (case, check, stats, measurement, integrity inside)

The records are those of cudabench.results.records.model, written as cudabench.results.records.codec says: their fields,
and beside them what readers of a file want without recomputing (a case's key, a result's status, a
check's passed, stats' iqr, noise and precision, a measurement's unit). Version 1 files lack error,
integrity, host and gpu; fields added later in version 2 are absent from earlier files, and readers take
their defaults (unknown); a missing `complete` reads true. Times are seconds per call. JSON has no NaN or
infinity: they are written as "nan", "inf", "-inf".

Files are written by cudabench.outputs; readers go through cudabench.files: a regular file of bounded size, parse failures as one message.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

from cudabench import __version__
from cudabench.errors import ConfigError
from cudabench.files import parse_json, read_input
from cudabench.outputs import write_text_atomic
from cudabench.results.records.codec import from_data, to_data
from cudabench.results.records.model import Case, Environment, Measurement, Result, RunTime
from cudabench.spec.family import Family

SCHEMA = "cudabench.results"
SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)


def result_to_dict(r: Result) -> dict[str, Any]:
    """A result as plain data, as files and worker messages carry it (cudabench.results.records.codec)."""
    return to_data(r)


def result_from_dict(d: Mapping[str, Any]) -> Result:
    """The inverse of result_to_dict (how a worker's result crosses the process boundary)."""
    return from_data(Result, d)


def case_to_dict(case: Case) -> dict[str, Any]:
    return to_data(case)


def case_from_dict(d: Mapping[str, Any]) -> Case:
    return from_data(Case, d)


def measurement_to_dict(m: Measurement) -> dict[str, Any]:
    return to_data(m)


def measurement_from_dict(m: Mapping[str, Any]) -> Measurement:
    return from_data(Measurement, m)


def document(results: Iterable[Result | dict], env: Environment, command: str = "",
             seed: Optional[int] = None, source_hashes: Optional[Mapping[str, str]] = None,
             complete: bool = True, run_time: Optional[RunTime] = None) -> dict[str, Any]:
    """The whole results document; `source_hashes` maps family names to `source_hash(family)`;
    `complete` is False for the copies written while the run goes on and for an interrupted run;
    `run_time`, once the run has ended, where its wall time went."""
    doc = {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "command": command,
        "seed": seed,
        "complete": complete,
        "environment": to_data(env),
        "source_hashes": dict(source_hashes or {}),
        "results": [r if isinstance(r, dict) else result_to_dict(r) for r in results],  # a dict: encoded already
    }
    if run_time is not None:
        doc["run_time"] = to_data(run_time)
    return doc


def run_time_from(doc: Mapping[str, Any]) -> Optional[RunTime]:
    """A document's run time, None where it has none (an older file, a run cut short)."""
    data = doc.get("run_time")
    return from_data(RunTime, data) if data else None


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


def json_text(data: Any, compact: bool = False) -> str:
    """`data` as JSON with NaN and infinities as strings; `compact` on one line (four times quicker than
    indented). json's C encoder does it all unless there is a NaN or an infinity to rewrite (json_safe's
    walk in Python cost a sweep's results file 1.2 s a run on the CPU, a thread beside the lanes)."""
    indent = None if compact else 1
    try:
        return json.dumps(data, indent=indent, allow_nan=False)
    except ValueError:
        return json.dumps(json_safe(data), indent=indent)


class DocumentText:
    """A results document as compact JSON text, each result encoded once: a run rewrites its file after
    every result, and encoding every earlier result again made that quadratic in the results."""

    def __init__(self) -> None:
        self._texts: dict[int, tuple[Any, str]] = {}  # id -> (the result, its text); holding it keeps the id its own
        self._mark = f"@@results-{secrets.token_hex(8)}@@"

    def __call__(self, doc: dict[str, Any]) -> str:
        texts = []
        for r in doc["results"]:
            known = self._texts.get(id(r))
            if known is None or known[0] is not r:
                known = self._texts[id(r)] = (r, json_text(r, compact=True))
            texts.append(known[1])
        head = json_text({**doc, "results": self._mark}, compact=True)
        return head.replace(json.dumps(self._mark), "[" + ", ".join(texts) + "]", 1)


def write_json_atomic(path: Path | str, data: dict[str, Any], compact: bool = False) -> None:
    """The document as JSON (json_text), written atomically (cudabench.outputs)."""
    write_text_atomic(path, json_text(data, compact) + "\n")


# ---- reading --------------------------------------------------------------------------------------

RESULTS_FILE = "results file"  # what cudabench.files calls it in messages


def _not_results(path: Path | str, why: str) -> ConfigError:
    return ConfigError(f"{path} is not a cudabench results file: {why}.",
                       "Give a file written by `cudabench run --json PATH`.")


def check_document(doc: Any, path: Path | str) -> dict[str, Any]:
    """`doc` validated against the results schema (cudabench.results.records.schema) and normalised: every
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

    from cudabench.results.records import schema  # pydantic only where files are read, never in `run`

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
    return results_from_bytes(read_input(path, RESULTS_FILE, allow_stdin), label)


def results_from_bytes(data: bytes, label: Path | str) -> dict[str, Any]:
    """A results document from the bytes of a file already read (see check_document)."""
    return check_document(parse_json(data, label, RESULTS_FILE), label)
