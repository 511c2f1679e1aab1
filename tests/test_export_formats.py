"""Results files: the JSON round trip through load_results, schema checks that name the file, and
the CSV and Markdown exports."""

import csv
import io
import json

import pytest

from cudabench.errors import ConfigError
from cudabench.results.export import (SCHEMA, SCHEMA_VERSION, load_results, source_hash, to_csv, to_markdown,
                              write_json_atomic)
from synthetic import doc, measured, skipped

SHAPE = {"B": 32, "C": 768, "T": 768}


def sample_doc():
    return doc([measured("timex", SHAPE, "timex-v4", 0.5e-3, n=20),
                measured("timex", SHAPE, "conv1d", 4.47e-3, role="baseline", n=20, seed=1),
                skipped("timex", {"T": 66}, "timex-v3")])


def test_json_round_trip(tmp_path):
    original = sample_doc()
    write_json_atomic(tmp_path / "r.json", original)
    loaded = load_results(tmp_path / "r.json")
    assert loaded == json.loads(json.dumps(original))
    assert loaded["schema"] == SCHEMA and loaded["schema_version"] == SCHEMA_VERSION
    assert loaded["source_hashes"] == {"timex": "ab" * 32}
    first = loaded["results"][0]
    assert first["case"]["key"] == "timex[B=32,C=768,T=768]/fwd" and len(first["measurement"]["samples"]) == 20


def test_source_hash_follows_the_sources(registry, tmp_path):
    import shutil
    from dataclasses import replace

    family = registry.family("add2")
    copy = replace(family, folder=tmp_path / "add2")
    shutil.copytree(family.folder, copy.folder)
    before = source_hash(copy)
    assert len(before) == 64 and before == source_hash(family)
    (copy.folder / "add2.cu").write_text("// changed\n")
    assert source_hash(copy) != before


@pytest.mark.parametrize("content, fragment", [
    ("{not json", "not valid JSON"),
    ('{"results": []}', "not a cudabench results file"),
    ('[1, 2]', "not a cudabench results file"),
    (json.dumps({"schema": SCHEMA, "schema_version": 99, "results": []}), "schema version 99"),
    (json.dumps({"schema": SCHEMA, "schema_version": 1, "results": {}}), '"results" is not a list'),
    (json.dumps({"schema": SCHEMA, "schema_version": 1, "results": [{"subject": "x"}]}), "results[0] lacks"),
])
def test_schema_errors_name_the_file(tmp_path, content, fragment):
    path = tmp_path / "old.json"
    path.write_text(content)
    with pytest.raises(ConfigError) as info:
        load_results(path)
    assert str(path) in info.value.message and fragment in info.value.message


def test_missing_results_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_results(tmp_path / "nope.json")


def test_csv_has_a_row_per_result_with_times_in_seconds():
    rows = list(csv.DictReader(io.StringIO(to_csv(sample_doc()))))
    assert [r["subject"] for r in rows] == ["timex-v4", "conv1d", "timex-v3"]
    v4, base, skip = rows
    assert (v4["family"], v4["shape"], v4["direction"], v4["role"], v4["status"]) == (
        "timex", "B=32,C=768,T=768", "fwd", "variant", "ok")
    assert float(v4["median"]) == pytest.approx(0.5e-3, rel=0.02) and v4["n"] == "20"
    assert float(v4["rel_error"]) == pytest.approx(2e-7) and (v4["timing"], v4["cache"]) == ("sync", "hot")
    for column in ("q1", "q3", "min", "mean", "stdev"):
        assert float(v4[column]) > 0
    assert base["role"] == "baseline"
    assert skip["status"] == "SKIP" and skip["median"] == "" and skip["skipped"].startswith("constraint")


def test_markdown_table_with_header_line():
    text = to_markdown(sample_doc())
    first_line = text.splitlines()[0]
    for part in ("NVIDIA H100 80GB HBM3", "sm_90", "driver** 550.54.15", "torch** 2.4.0", "2024-06-01"):
        assert part in first_line
    assert "`cudabench run --config configs/timex-sweep.toml`" in text
    lines = [line for line in text.splitlines() if line.startswith("|")]
    assert lines[0].startswith("| family | shape | dir | subject |") and set(lines[1]) <= set("|-:")
    assert len(lines) == 2 + 3
    v4, base, skip = ([c.strip() for c in line.strip("|").split("|")] for line in lines[2:])
    assert v4[:7] == ["timex", "B=32,C=768,T=768", "fwd", "timex-v4", "variant", "ok", "2.0e-07"]
    assert all(cell.endswith(" µs") for cell in v4[7:13]) and v4[13:] == ["20", "sync", "hot"]
    assert base[7].startswith("4.4") and base[7].endswith(" ms")
    assert skip[5] == "SKIP" and skip[7:] == ["-"] * 9
