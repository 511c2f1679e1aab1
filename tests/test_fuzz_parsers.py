"""Hypothesis over every parser a user's text reaches: shape strings, suite TOML, --warmup,
thresholds and results JSON. Any input ends in a typed error (CudabenchError) or a valid value,
never another exception, and never takes long (a deadline per example)."""

import json
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from cudabench.engine.plan import RunOptions
from cudabench.engine.suite import plan_suite
from cudabench.errors import CudabenchError
from cudabench.results.compare.verdicts import parse_threshold
from cudabench.engine.suite_file import load_suite
from cudabench.engine.suite_values import parse_warmup
from cudabench.spec.registry import discover
from cudabench.spec.shapes import LARGEST, parse_shape

FUZZ = settings(max_examples=150, deadline=2000, suppress_health_check=[HealthCheck.function_scoped_fixture])
REGISTRY = discover([])

# text that looks like what users type, plus anything at all
shape_alphabet = st.sampled_from(list("BCTnMNK=,^*_-+ 0123456789.e") + ["**", "^", "10^", "2^6", "x"])
shapelike = st.lists(shape_alphabet, max_size=30).map("".join)


def typed_or_valid(parse, text):
    try:
        return parse(text)
    except CudabenchError:
        return None


def rejected_in_one_paragraph(parse, text):
    """None when `parse` accepts `text`, else the error, which must be one typed paragraph."""
    try:
        parse(text)
    except CudabenchError as exc:
        assert exc.message.strip() and "Traceback" not in exc.message
        return exc
    return None


names = st.text(string.ascii_letters, min_size=1, max_size=3)
valid_shapes = st.dictionaries(names, st.integers(0, LARGEST), min_size=1, max_size=4)


@FUZZ
@given(valid_shapes)
def test_every_valid_shape_round_trips(shape):
    from cudabench.spec.shapes import format_shape

    assert parse_shape(format_shape(shape)) == shape
    assert parse_shape(",".join(f"{k}=2^{v.bit_length() - 1}" for k, v in shape.items() if v & (v - 1) == 0 and v)) \
        == {k: v for k, v in shape.items() if v & (v - 1) == 0 and v}


@FUZZ
@given(st.one_of(shapelike, st.text(max_size=40)))
def test_shape_strings(text):
    error = rejected_in_one_paragraph(parse_shape, text)
    if error is None:  # accepted: whole numbers in range, and the same shape when written back
        from cudabench.spec.shapes import format_shape

        shape = parse_shape(text)
        assert all(isinstance(v, int) and 0 <= v <= LARGEST for v in shape.values())  # causal=0 is a shape
        assert parse_shape(format_shape(shape)) == shape


@FUZZ
@given(st.one_of(st.integers(1, 10**6), st.builds(lambda n, unit: f"{n}{unit}", st.integers(1, 10**4),
                                                   st.sampled_from(["", "ms", "s"]))))
def test_every_valid_warmup_is_read_as_written(value):
    calls, seconds = parse_warmup(value)
    text = str(value)
    if text.endswith("ms"):
        assert seconds == pytest.approx(int(text[:-2]) / 1000)
    elif text.endswith("s"):
        assert seconds == pytest.approx(int(text[:-1]))
    else:
        assert (calls, seconds) == (int(text), 0.0)


@FUZZ
@given(st.one_of(st.text(string.digits + ".msh -+e", max_size=12), st.text(max_size=12),
                 st.integers(-10**30, 10**30), st.booleans(), st.floats()))
def test_warmup(value):
    if rejected_in_one_paragraph(parse_warmup, value) is None:
        calls, seconds = parse_warmup(value)
        assert calls >= 1 and 0 <= seconds <= 86_400


@FUZZ
@given(st.integers(0, 9_999))
def test_every_valid_threshold_is_read_as_written(basis_points):
    assert parse_threshold(f"{basis_points / 100}%") == pytest.approx(basis_points / 10_000)
    assert parse_threshold(str(basis_points / 10_000)) == pytest.approx(basis_points / 10_000)  # 1.0 is ambiguous


@FUZZ
@given(st.one_of(st.text(string.digits + ".%-e+ infa", max_size=10), st.text(max_size=10)))
def test_thresholds(text):
    if rejected_in_one_paragraph(parse_threshold, text) is None:
        value = parse_threshold(text)
        assert value >= 0 and value == value


# ---- suite files: random TOML built from the real keys and odd values -------------------------------

keys = st.sampled_from(["kernels", "shape", "directions", "baselines", "timing", "cold", "repeat", "min_time",
                        "noise", "max_time", "warmup", "timeout", "from", "to", "times", "step", "T", "B", "C",
                        "n", "name", "x"])
scalars = st.one_of(st.integers(-2**70, 2**70), st.floats(allow_nan=False), st.booleans(),
                    st.sampled_from(["timex", "timex-v4", "add2", "fwd", "fwdbwd", "all", "2^20", "10^99999",
                                     "100ms", "events", "", "1_024"]),
                    st.text(string.ascii_letters + string.digits + "^_-", max_size=8))


def toml_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if value == value and abs(value) != float("inf") else "nan"
    if isinstance(value, (int, str)):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"


values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                        st.dictionaries(keys, inner, max_size=3)), max_leaves=6)
tables = st.dictionaries(keys, values, max_size=5)


@FUZZ
@given(timing=st.one_of(st.none(), tables), cases=st.lists(tables, max_size=3), junk=st.text(max_size=20))
def test_suite_files(tmp_path_factory, timing, cases, junk):
    text = "".join("[timing]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in timing.items())
                   for _ in [0] if timing is not None)
    for case in cases:
        text += "[[case]]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in case.items())
    path = Path(tmp_path_factory.mktemp("suite")) / "suite.toml"
    path.write_text(text + (junk if not cases else ""))
    suite = typed_or_valid(load_suite, path)
    if suite is not None:
        typed_or_valid(lambda s: plan_suite(REGISTRY, s, RunOptions()), suite)
