"""Results files are read through one declared schema (cudabench.results.records.schema): every wrong type or
missing field is a ConfigError naming the file and the field, `compare` and `plot` turn it into one
paragraph and exit 2, and whatever loads is safe for every consumer."""

import copy
import json
import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from typer.testing import CliRunner

from cudabench.cli.app import app
from cudabench.errors import ConfigError
from cudabench.results.compare.render import to_json, to_markdown as verdicts_markdown
from cudabench.results.compare.verdicts import compare_documents
from cudabench.results.exporters.csv_file import to_csv
from cudabench.results.exporters.json_document import (json_safe, check_document, document, load_results, result_from_dict,
                                      write_json_atomic, run_time_from)
from cudabench.results.exporters.markdown_file import to_markdown
from cudabench.results.records.model import Check, IntegrityCheck, RunTime
from cudabench.results.plots.sweep import sweep_panels
from synthetic import ENV, doc, measured, skipped, timex_sweep

SHAPE = {"B": 32, "C": 768, "T": 768}
runner = CliRunner()


def valid():
    """A results document as it lies in a file: three measured results and a skipped one."""
    results = [measured("timex", SHAPE, "timex-v4", 1e-3, seed=1),
               measured("timex", SHAPE, "conv1d", 4e-3, role="baseline", seed=2),
               measured("timex", {**SHAPE, "T": 1024}, "timex-v4", 1.3e-3, seed=3),
               skipped("timex", {**SHAPE, "T": 66}, "timex-v3")]
    return json.loads(json.dumps(json_safe(doc(results))))


def written(tmp_path, data, name="old.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def load_error(tmp_path, data):
    path = written(tmp_path, data)
    with pytest.raises(ConfigError) as info:
        load_results(path)
    return path, info.value


def set_field(data, path, value):
    node = data
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return data


# ---- wrong types and missing fields: the file, the field, what is wrong -------------------------------

WRONG_TYPES = [
    (("results", 0, "measurement"), [1e-3, 2e-3], "results[0].measurement: Input should be an object, got a list"),
    (("results", 1, "case", "key"), ["timex", "fwd"], "results[1].case.key: Input should be a valid string"),
    (("environment",), None, "environment: Input should be an object, got null"),
    (("results", 2, "stats"), "fast", 'results[2].stats: Input should be an object, got the string "fast"'),
    (("results", 0, "case", "shape"), "B=32,C=768,T=768", "results[0].case.shape: Input should be an object"),
    (("results", 0, "case", "shape", "T"), "768", 'results[0].case.shape.T: Input should be a valid integer, '
                                                  'got the string "768"'),
    (("results", 0, "measurement", "timing"), {"mode": "sync"}, "results[0].measurement.timing: Input should be "
                                                               "a valid string, got an object"),
    (("results", 2, "stats", "median"), "fast", "results[2].stats.median: Input should be a valid number"),
    (("results", 0, "measurement", "samples", 4), None, "results[0].measurement.samples[4]: Input should be a "
                                                        "valid number, got null"),
    (("results", 0, "status"), "okay", "results[0].status: Input should be 'ok', 'SKIP', 'FAIL', 'ERROR' or "
                                       "'INVALID'"),
    (("results", 1, "role"), 3, "results[1].role: Input should be 'variant' or 'baseline', got the number 3"),
    (("seed",), "7", "seed: Input should be a valid integer"),
]


@pytest.mark.parametrize("where, value, expected", WRONG_TYPES, ids=[w[2].split(":")[0] for w in WRONG_TYPES])
def test_a_wrong_type_names_the_file_and_the_field(tmp_path, where, value, expected):
    path, error = load_error(tmp_path, set_field(valid(), where, value))
    assert error.message.startswith(f"{path}: ") and expected in error.message
    assert error.exit_code == 2 and "cudabench.results" in error.hint


def test_a_missing_field_is_named(tmp_path):
    data = valid()
    del data["results"][2]["stats"]["median"]
    del data["environment"]["driver"]
    _, error = load_error(tmp_path, data)
    assert "environment.driver: missing" in error.message and "results[2].stats.median: missing" in error.message


def test_a_missing_optional_section_is_still_a_missing_field(tmp_path):
    data = valid()
    del data["results"][3]["measurement"]  # null when not measured, but always written
    _, error = load_error(tmp_path, data)
    assert "results[3].measurement: missing" in error.message


def test_many_wrong_fields_are_summarised_in_one_sentence(tmp_path):
    data = valid()
    for r in data["results"]:
        r["subject"], r["flops"] = 1, "many"   # 8 wrong fields
    _, error = load_error(tmp_path, data)
    assert error.message.count("results[") == 5 and error.message.endswith("; and 3 more.")
    assert "\n" not in error.message


@pytest.mark.parametrize("data, fragment", [
    ([valid()], 'no "schema": "cudabench.results"'),
    ({**valid(), "results": [1, "timex", None]}, "results[0]: Input should be an object, got the number 1"),
    ({**valid(), "results": {"0": {}}}, "results: Input should be a valid list, got an object"),
    ({**valid(), "schema_version": 3}, "schema version 3"),
    ({**valid(), "schema_version": True}, "schema version True"),
])
def test_documents_of_the_wrong_shape(tmp_path, data, fragment):
    _, error = load_error(tmp_path, data)
    assert fragment in error.message


def test_the_non_objects_in_a_results_list_are_each_named(tmp_path):
    _, error = load_error(tmp_path, {**valid(), "results": [1, "timex", None]})
    for i, kind in enumerate(("the number 1", 'the string "timex"', "null")):
        assert f"results[{i}]: Input should be an object, got {kind}" in error.message


# ---- what does load -----------------------------------------------------------------------------------

def test_an_empty_results_list_loads(tmp_path):
    loaded = load_results(written(tmp_path, {**valid(), "results": []}))
    assert loaded["results"] == [] and loaded["environment"]["gpu"] == ENV.gpu


def test_a_version_1_file_still_reads_with_the_version_2_fields_defaulted(tmp_path):
    data = valid()
    data["schema_version"] = 1
    for r in data["results"]:
        for field in ("error", "integrity", "host", "gpu"):
            del r[field]
    loaded = load_results(written(tmp_path, data))
    assert [(r["error"], r["integrity"], r["host"], r["gpu"]) for r in loaded["results"]] == [(None, [], "", "")] * 4
    assert compare_documents(loaded, loaded).exit_code == 0


def test_nan_and_infinity_strings_read_back_as_floats(tmp_path):
    data = valid()
    data["results"][0]["check"]["errors"]["out"] = "nan"
    data["results"][0]["stats"]["noise"] = "inf"
    data["results"][0]["measurement"]["clocks"]["skew"] = "-inf"
    r = load_results(written(tmp_path, data))["results"][0]
    assert math.isnan(r["check"]["errors"]["out"]) and r["stats"]["noise"] == math.inf
    assert r["measurement"]["clocks"]["skew"] == -math.inf


def test_other_strings_are_not_numbers(tmp_path):
    _, error = load_error(tmp_path, set_field(valid(), ("results", 0, "stats", "q1"), "NaN"))
    assert 'results[0].stats.q1: Input should be a valid number, got the string "NaN"' in error.message


def test_unknown_keys_are_kept(tmp_path):
    data = valid()
    data["note"] = "nightly"
    data["results"][0]["tags"] = ["a"]
    loaded = load_results(written(tmp_path, data))
    assert loaded["note"] == "nightly" and loaded["results"][0]["tags"] == ["a"]


def test_a_document_round_trips_unchanged_in_meaning(tmp_path):
    first = measured("timex", SHAPE, "timex-v4", 1e-3, seed=1)
    results = [replace(first, host="node7", gpu="GPU-1234",
                       integrity=(IntegrityCheck("stale-output", "pass", "error 0.0"),
                                  IntegrityCheck("process-state", "not run", "no GPU"))),
               replace(measured("timex", SHAPE, "conv1d", 4e-3, role="baseline", seed=2), error="hung"),
               skipped("timex", {**SHAPE, "T": 66}, "timex-v3")]
    original = doc(results)
    write_json_atomic(tmp_path / "r.json", original)
    loaded = load_results(tmp_path / "r.json")
    assert [result_from_dict(r) for r in loaded["results"]] == results
    assert {k: v for k, v in loaded.items() if k != "results"} == {k: v for k, v in original.items() if k != "results"}
    assert loaded == original  # as plain data too: nothing added, nothing lost
    ended = document(results, ENV, run_time=RunTime(12.5, 4, (("start-up", 2.0), ("build", 0.5))))
    write_json_atomic(tmp_path / "ended.json", ended)
    assert load_results(tmp_path / "ended.json") == ended
    assert run_time_from(ended) == RunTime(12.5, 4, (("start-up", 2.0), ("build", 0.5)))
    assert run_time_from(original) is None


def test_non_finite_figures_round_trip(tmp_path):
    bad = replace(measured("timex", SHAPE, "timex-v4", 1e-3), check=Check((("out", math.nan),), 1e-5))
    write_json_atomic(tmp_path / "r.json", document([bad], ENV))
    loaded = load_results(tmp_path / "r.json")
    again = result_from_dict(loaded["results"][0])
    assert math.isnan(dict(again.check.errors)["out"]) and again.status == "FAIL"


# ---- the commands: one paragraph, exit 2, never a traceback ------------------------------------------

MALFORMED = [set_field(valid(), where, value) for where, value, _ in WRONG_TYPES] + [
    [valid()], {**valid(), "results": [1, "timex"]}, {**valid(), "results": None}, {"schema": "cudabench.results"},
]


@pytest.mark.parametrize("command", ["compare", "plot"])
@pytest.mark.parametrize("data", MALFORMED, ids=[f"malformed{i}" for i in range(len(MALFORMED))])
def test_commands_on_a_malformed_file_give_one_paragraph_and_exit_2(tmp_path, command, data):
    bad = written(tmp_path, data, "bad.json")
    good = tmp_path / "good.json"
    write_json_atomic(good, timex_sweep())
    args = [command, str(good), str(bad)] if command == "compare" else [command, str(bad), "-o",
                                                                           str(tmp_path / "p.png")]
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert "Traceback" not in res.output and res.output.startswith("error: ") and "bad.json" in res.output
    assert not (tmp_path / "p.png").exists()


def test_an_empty_new_file_fails_compare_but_is_no_usage_error(tmp_path):
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    write_json_atomic(old, valid())
    write_json_atomic(new, {**valid(), "results": []})
    res = runner.invoke(app, ["compare", str(old), str(new)])
    assert res.exit_code == 1 and "nothing measured in new" in res.output


# ---- whatever loads is safe everywhere ---------------------------------------------------------------

def _paths(node, prefix=()):
    yield prefix
    children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in children:
        yield from _paths(child, (*prefix, key))


BASE = json.loads(json.dumps(json_safe(timex_sweep())))
BASE["results"] = BASE["results"][:6]  # two shapes of three subjects: a sweep of T, small enough to walk
PATHS = [p for p in _paths(BASE) if p and not (len(p) > 4 and p[3] == "samples" and p[4] > 2)]
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats() | st.text(max_size=4)
    | st.sampled_from(["nan", "inf", "ok", "INVALID", "ERROR", "baseline", "fail"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=4)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(st.sampled_from(PATHS), JSON_VALUES), min_size=1, max_size=3))
def test_any_edit_either_loads_and_every_consumer_copes_or_is_a_config_error(edits):
    data = copy.deepcopy(BASE)
    for where, value in edits:
        try:
            set_field(data, where, value)
        except (KeyError, IndexError, TypeError):
            pass  # an earlier edit replaced a parent
    try:
        loaded = check_document(data, Path("edited.json"))
    except ConfigError as exc:
        assert exc.message.startswith("edited.json")
        return
    reference = check_document(BASE, Path("base.json"))
    for comparison in (compare_documents(reference, loaded), compare_documents(loaded, reference)):
        json.dumps(json_safe(to_json(comparison)))
        verdicts_markdown(comparison)
    to_csv(loaded), to_markdown(loaded)
    try:
        sweep_panels(loaded)
    except ConfigError:
        pass  # an edit can leave nothing to plot


def test_run_and_the_worker_never_import_pydantic():
    code = ("import sys, cudabench.cli.app, cudabench.engine.worker, cudabench.results.exporters.json_document; "
            "sys.exit('pydantic' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
