"""One definition of a record (cudabench.results.records.codec): a field added to a record reaches the file,
the worker messages and the schema check with that one edit, and files without it still read."""

import dataclasses
import math
from typing import Optional

import pytest
from pydantic import ValidationError

from cudabench.results.records.codec import from_data, later, to_data, written
from cudabench.results.exporters.json_document import result_from_dict, result_to_dict
from cudabench.results.records.model import Case, Check, IntegrityCheck, Result
from cudabench.results.records.schema import model_of
from synthetic import measured

SHAPE = {"B": 2, "C": 3, "T": 4}


@dataclasses.dataclass(frozen=True)
class Probe:
    """A record as a developer would add one, with one field of each kind."""

    name: str
    shape: tuple[tuple[str, int], ...]
    checks: tuple[IntegrityCheck, ...]
    check: Optional[Check] = None
    clock_ratio: float = later(math.nan)   # the one edit: a field newer files carry

    @written
    def label(self) -> str:
        return self.name.upper()


def probe():
    return Probe("p", (("B", 2),), (IntegrityCheck("no-work", "pass", "ok"),), Check((("out", 1e-7),), 1e-5), 0.97)


def test_a_new_field_is_written_read_back_and_checked_with_no_other_edit():
    data = to_data(probe())
    assert data == {"name": "p", "shape": {"B": 2}, "checks": [{"name": "no-work", "verdict": "pass", "detail": "ok"}],
                    "check": {"errors": {"out": 1e-7}, "tolerance": 1e-5, "passed": True}, "clock_ratio": 0.97,
                    "label": "P"}
    assert from_data(Probe, data) == probe()
    checked = model_of(Probe).model_validate(data).model_dump()
    assert checked == data
    with pytest.raises(ValidationError, match="clock_ratio"):
        model_of(Probe).model_validate({**data, "clock_ratio": "fast"})


def test_a_file_from_before_the_field_reads_with_its_default():
    older = {k: v for k, v in to_data(probe()).items() if k != "clock_ratio"}
    assert model_of(Probe).model_validate(older).model_dump()["clock_ratio"] is None  # unknown
    assert math.isnan(from_data(Probe, older).clock_ratio)


def test_a_field_of_the_first_format_is_required():
    data = to_data(probe())
    del data["shape"]
    with pytest.raises(ValidationError, match="shape"):
        model_of(Probe).model_validate(data)
    with pytest.raises(ValueError, match="Probe.shape is missing"):
        from_data(Probe, data)


def test_written_properties_are_recomputed_never_read():
    data = {**to_data(probe()), "label": "forged"}
    assert from_data(Probe, data).label == "P"
    r = result_to_dict(measured("timex", SHAPE, "timex-v4", 1e-3))
    r["status"] = "ok"
    r["check"]["errors"]["out"] = 1.0   # a wrong result with a forged status
    assert result_from_dict(r).status == "FAIL"


def test_every_record_field_is_in_the_schema():
    for record in (Result, Case, Check):
        declared = {f.name for f in dataclasses.fields(record)}
        assert declared <= set(model_of(record).model_fields)
