"""The results document's schema check (pydantic v2), for readers only: `load_results` in
cudabench.results.exporters.json_document imports this module when it reads a file, so `cudabench run` and the worker
never import pydantic.

The models are made from the records of cudabench.results.records.model (their fields and type hints, read as
cudabench.results.records.codec writes them), so they cannot drift from what is written. Validation is strict:
a string is never read as a number nor a number as a string, so a hand-edited or foreign file fails
with the path of the first wrong field instead of a traceback deep in compare or plot. Every field is
required but those added after a file format was first written (`later` in the records), which read
as their defaults; null only where the record allows it. Two leniencies: the "nan", "inf" and "-inf"
strings that JSON needs read back as floats, and unknown keys are kept as they are, so a file from a
later minor change still reads.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Annotated, Any, Literal, Optional

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, create_model

from cudabench.results.records import model
from cudabench.results.records.codec import BLANK_AS_NULL, LATER, Kind, default_data, hints, kind_of, written_properties

NON_FINITE = ("nan", "inf", "-inf")  # how export.json_safe writes NaN and infinities
MAX_REPORTED = 5                     # wrong fields named in one message


def _non_finite_float(value: Any) -> Any:
    return float(value) if isinstance(value, str) and value in NON_FINITE else value


Number = Annotated[float, BeforeValidator(_non_finite_float)]
Int = Annotated[int, Field(ge=-2**63, lt=2**63)]  # what the results store and NumPy hold: no 400-digit counts
SCALARS = {float: Number, int: Int, str: str, bool: bool}


class _Record(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow", populate_by_name=True)


def file_type(kind: Kind) -> Any:
    """The pydantic type of what a field of this kind is in a file."""
    if kind.form == "optional":
        return Optional[file_type(kind.inner)]
    if kind.form == "mapping":
        return dict[str, file_type(kind.inner)]
    if kind.form == "list":
        return list[file_type(kind.inner)]
    if kind.form == "record":
        return model_of(kind.inner)
    if kind.form == "literal":
        return Literal[kind.values]
    return SCALARS[kind.inner]


@functools.lru_cache(maxsize=None)
def model_of(record: type) -> type[BaseModel]:
    """The pydantic model of one record class, as files hold it."""
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(record):
        kind = kind_of(hints(record)[f.name])
        typed, default = file_type(kind), default_data(f, kind) if f.metadata.get(LATER) else ...
        if f.metadata.get(BLANK_AS_NULL) or default is None:  # null: no text, or not known (NaN)
            typed = Optional[typed]
        fields[f.name] = (typed, default)
    for name, hint, later in written_properties(record):
        typed = file_type(kind_of(hint))
        fields[name] = (Optional[typed], None) if later else (typed, ...)
    return create_model(record.__name__, __base__=_Record, **fields)


class Document(_Record):
    schema_name: str = Field(alias="schema")
    schema_version: Int
    command: str
    seed: Optional[Int]
    complete: bool = True
    environment: model_of(model.Environment)  # type: ignore[valid-type]
    source_hashes: dict[str, str]
    run_time: Optional[model_of(model.RunTime)] = None  # type: ignore[valid-type]  # older files lack it
    results: list[model_of(model.Result)]  # type: ignore[valid-type]


def normalised(doc: Any) -> dict[str, Any]:
    """`doc` as plain data with every field present and typed (NaN strings read as floats);
    raises pydantic's ValidationError where it does not match the schema."""
    data = Document.model_validate(doc).model_dump(by_alias=True)
    if data.get("run_time") is None:
        data.pop("run_time", None)  # an older file, or a copy written before the run ended: as it was
    return data


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
