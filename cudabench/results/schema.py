"""The results document as one declared schema (pydantic v2), for readers only: `load_results` in
cudabench.results.export imports this module when it reads a file, so `cudabench run` and the worker
never import pydantic.

The models mirror what `result_to_dict` and `document()` write (see the docstring of
cudabench.results.export). Validation is strict: a string is never read as a number nor a number as a
string, so a hand-edited or foreign file fails with the path of the first wrong field instead of a
traceback deep in compare or plot. Two leniencies: the "nan", "inf" and "-inf" strings that JSON needs
read back as floats, and version 1 files (no error, integrity, host, gpu) get those fields' defaults.
Unknown keys are kept as they are, so a file from a later minor change still reads.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

NON_FINITE = ("nan", "inf", "-inf")  # how export.json_safe writes NaN and infinities
MAX_REPORTED = 5                     # wrong fields named in one message


def _non_finite_float(value: Any) -> Any:
    return float(value) if isinstance(value, str) and value in NON_FINITE else value


Number = Annotated[float, BeforeValidator(_non_finite_float)]
Int = Annotated[int, Field(ge=-2**63, lt=2**63)]  # what the results store and NumPy hold: no 400-digit counts


class _Record(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow", populate_by_name=True)


class Environment(_Record):
    gpu: str
    gpu_index: Int = -1
    gpu_uuid: str = ""
    capability: str
    sm_count: Int
    l2_bytes: Int
    memory_bytes: Int
    driver: str
    cuda_runtime: str
    torch: str
    python: str
    cudabench: str
    hostname: str
    date: str
    settings: dict[str, str]


class Case(_Record):
    family: str
    shape: dict[str, Int]
    direction: str
    dtype: str
    inputs: str
    key: str


class IntegrityItem(_Record):
    name: str
    verdict: Literal["pass", "fail", "not run"]
    detail: str


class Check(_Record):
    errors: dict[str, Number]
    tolerance: Number
    passed: bool


class Stats(_Record):
    n: Int
    median: Number
    q1: Number
    q3: Number
    min: Number
    max: Number
    mean: Number
    stdev: Number
    iqr: Number
    noise: Number
    ci_low: Optional[Number] = None      # the median's 95 % interval; absent in files before it was recorded
    ci_high: Optional[Number] = None
    precision: Optional[Number] = None


class Measurement(_Record):
    timing: str
    cache: str
    unit: str
    warmup_calls: Int
    warmup_seconds: Number
    stop_reason: str
    calls_per_sample: Int
    clocks: dict[str, Number]
    extra: dict[str, Number]
    samples: list[Number]


class Result(_Record):
    case: Case
    subject: str
    role: Literal["variant", "baseline"]
    status: Literal["ok", "SKIP", "FAIL", "ERROR", "INVALID"]
    skipped: Optional[str]
    flops: Number
    bytes: Number
    check: Optional[Check]
    stats: Optional[Stats]
    measurement: Optional[Measurement]
    # added in version 2
    error: Optional[str] = None
    host: str = ""
    gpu: str = ""
    gpu_index: Int = -1     # added with --gpus: NVML's index of the GPU it ran on, and its UUID
    gpu_uuid: str = ""
    integrity: list[IntegrityItem] = []
    phases: dict[str, Number] = {}  # added later in version 2: seconds per phase of the subject
    peak_memory: Int = -1           # added later in version 2: bytes one call allocated beyond its inputs


class Document(_Record):
    schema_name: str = Field(alias="schema")
    schema_version: Int
    command: str
    seed: Optional[Int]
    complete: bool = True
    environment: Environment
    source_hashes: dict[str, str]
    results: list[Result]


def normalised(doc: Any) -> dict[str, Any]:
    """`doc` as plain data with every field present and typed (NaN strings read as floats);
    raises pydantic's ValidationError where it does not match the schema."""
    return Document.model_validate(doc).model_dump(by_alias=True)


# ---- messages -------------------------------------------------------------------------------------

_MESSAGES = {  # pydantic's wording where it speaks Python rather than JSON
    "missing": "missing",
    "model_type": "Input should be an object",
    "model_attributes_type": "Input should be an object",
    "dict_type": "Input should be an object",
}


def field_path(loc: tuple[Any, ...]) -> str:
    """('results', 3, 'stats', 'median') -> 'results[3].stats.median'."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(the document)"


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        long = isinstance(value, int) and abs(value) >= 10**30
        shown = f"of {len(str(abs(value)))} digits" if long else repr(value)
        return f"the number {shown}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f'the string "{shown}"'
    return "a list" if isinstance(value, list) else "an object" if isinstance(value, dict) else type(value).__name__


def problems(error: ValidationError) -> list[str]:
    """One 'field.path: what is wrong' line per error, for a user to find in the file."""
    lines = []
    for e in error.errors():
        what = _MESSAGES.get(e["type"], e["msg"])
        if e["type"] != "missing":
            what += f", got {_json_kind(e.get('input'))}"
        lines.append(f"{field_path(e['loc'])}: {what}")
    return lines


def describe(error: ValidationError) -> str:
    """The first MAX_REPORTED problems in one sentence."""
    lines = problems(error)
    more = len(lines) - MAX_REPORTED
    return "; ".join(lines[:MAX_REPORTED]) + (f"; and {more} more" if more > 0 else "")
