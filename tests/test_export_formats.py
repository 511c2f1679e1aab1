"""Results files: the JSON round trip through load_results, schema checks that name the file, and
the CSV and Markdown exports."""

import csv
import io
import json
import os
from pathlib import Path

import pytest

from cudabench.errors import ConfigError
from cudabench.outputs import check_output_path, write_text_atomic, writes_to_stdout
from cudabench.results.exporters.csv_file import to_csv
from cudabench.results.exporters.json_document import SCHEMA, SCHEMA_VERSION, load_results, source_hash, write_json_atomic
from cudabench.results.exporters.markdown_file import to_markdown
from cudabench.results.exporters.rows import flat_rows
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
    (json.dumps({"schema": SCHEMA, "schema_version": 1, "results": {}}), "results: Input should be a valid list"),
    (json.dumps({"schema": SCHEMA, "schema_version": 1, "results": [{"subject": "x"}]}), "results[0].case: missing"),
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
    assert lines[0].startswith("| family | shape | dir | dtype | subject |") and set(lines[1]) <= set("|-:")
    assert len(lines) == 2 + 3
    v4, base, skip = ([c.strip() for c in line.strip("|").split("|")] for line in lines[2:])
    assert v4.pop(3) == "float32" and base.pop(3) == "float32" and skip.pop(3) == "float32"
    assert v4[:7] == ["timex", "B=32,C=768,T=768", "fwd", "timex-v4", "variant", "ok", "2.0e-07"]
    assert all(cell.endswith(" µs") for cell in v4[7:15])
    assert v4[15:18] == ["20", "-", "-"] and v4[20:] == ["-", "-", "sync", "hot"]  # no ceiling, no memory
    assert float(v4[18]) == pytest.approx(1e9 / 0.5e-3 / 1e12, rel=0.05) and v4[19] == "2"  # synthetic: 1 GFLOP, 1 MB
    assert base[7].startswith("4.4") and base[7].endswith(" ms")
    assert skip[5] == "SKIP" and skip[7:] == ["-"] * 17


# ---- CUPTI kernel time and kernels per call ------------------------------------------------------------

def with_kernel_figures():
    from dataclasses import replace

    timed = measured("timex", SHAPE, "timex-v4", 20e-6, n=20)
    figures = replace(timed.measurement, extra=(("kernel_time_cupti", 4.5e-6), ("kernels_per_call", 3.0)))
    return doc([replace(timed, measurement=figures), measured("timex", SHAPE, "conv1d", 4.47e-3, role="baseline")])


def test_csv_has_the_cupti_kernel_time_and_kernels_per_call():
    cupti, plain = csv.DictReader(io.StringIO(to_csv(with_kernel_figures())))
    assert float(cupti["kernel_time"]) == pytest.approx(4.5e-6) and cupti["kernels_per_call"] == "3"
    assert plain["kernel_time"] == "" and plain["kernels_per_call"] == ""


def test_markdown_has_the_cupti_kernel_time_and_kernels_per_call():
    lines = [line for line in to_markdown(with_kernel_figures()).splitlines() if line.startswith("|")]
    head, cupti, plain = ([c.strip() for c in line.strip("|").split("|")] for line in (lines[0], *lines[2:]))
    at = head.index("kernel time")
    assert head[at + 1] == "kernels/call"
    assert cupti[at:at + 2] == ["4.50 µs", "3"] and plain[at:at + 2] == ["-", "-"]


def test_rates_are_over_the_kernel_time_where_cupti_measured_it_and_carry_the_ceiling_share():
    from dataclasses import replace

    timed = measured("timex", SHAPE, "timex-v4", 20e-6, n=20)
    figures = replace(timed.measurement, extra=(("kernel_time_cupti", 4e-6), ("ceiling_fraction", 0.625)))
    cupti, plain = flat_rows(doc([replace(timed, measurement=figures), measured("timex", SHAPE, "conv1d", 1e-3)]))
    assert cupti["tflops"] == pytest.approx(1e9 / 4e-6 / 1e12) and cupti["gbps"] == pytest.approx(1e6 / 4e-6 / 1e9)
    assert cupti["ceiling"] == 0.625 and plain["ceiling"] is None
    assert plain["tflops"] == pytest.approx(1e9 / plain["median"] / 1e12, rel=1e-9)
    lines = [line for line in to_markdown(doc([replace(timed, measurement=figures)])).splitlines() if line.startswith("|")]
    head, row = ([c.strip() for c in line.strip("|").split("|")] for line in (lines[0], lines[2]))
    assert [row[head.index(c)] for c in ("TFLOP/s", "GB/s", "% ceiling")] == ["250.00", "250", "62%"]


def test_flat_rows_carry_the_kernel_figures_from_a_loaded_file(tmp_path):
    write_json_atomic(tmp_path / "r.json", with_kernel_figures())
    rows = flat_rows(load_results(tmp_path / "r.json"))
    assert [(r["kernel_time"], r["kernels_per_call"]) for r in rows] == [(pytest.approx(4.5e-6), 3), (None, None)]


# ---- where files are written: through symlinks, never onto devices, '-' for standard output -----------

def test_a_symlink_to_a_results_file_stays_a_symlink_and_its_target_is_replaced(tmp_path):
    (tmp_path / "runs").mkdir()
    target = tmp_path / "runs" / "2024-06-01.json"
    target.write_text("old")
    target.chmod(0o640)
    link = tmp_path / "latest.json"
    link.symlink_to(Path("runs") / "2024-06-01.json")
    write_json_atomic(link, sample_doc())
    assert link.is_symlink() and load_results(link)["results"][0]["subject"] == "timex-v4"
    assert load_results(target) == load_results(link) and (target.stat().st_mode & 0o777) == 0o640
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["2024-06-01.json"]  # no temporary left


def test_a_dangling_symlink_creates_its_target(tmp_path):
    link = tmp_path / "latest.md"
    link.symlink_to(tmp_path / "out" / "report.md")
    write_text_atomic(link, "# hello\n")
    assert link.is_symlink() and (tmp_path / "out" / "report.md").read_text() == "# hello\n"


@pytest.mark.parametrize("make, kind", [
    (lambda tmp: Path("/dev/null"), "a character device"),
    (lambda tmp: tmp, "a folder"),
    (lambda tmp: (os.mkfifo(tmp / "pipe"), tmp / "pipe")[1], "a named pipe"),
    (lambda tmp: (os.symlink("/dev/null", tmp / "sneaky.json"), tmp / "sneaky.json")[1], "a character device"),
])
def test_devices_folders_and_fifos_are_refused(tmp_path, make, kind):
    path = make(tmp_path)
    with pytest.raises(ConfigError) as info:
        write_text_atomic(path, "text")
    assert str(path) in info.value.message and kind in info.value.message and info.value.exit_code == 2
    with pytest.raises(ConfigError):
        check_output_path(path)


def test_a_folder_that_cannot_be_made_is_a_config_error(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="Cannot write .*file/r.csv"):
        write_text_atomic(tmp_path / "file" / "r.csv", "a,b\n")


@pytest.mark.parametrize("name", ["-", "/dev/stdout"])
def test_dash_and_dev_stdout_write_to_standard_output(capsys, name):
    assert writes_to_stdout(name) and writes_to_stdout(Path(name)) and not writes_to_stdout("results.json")
    write_json_atomic(name, sample_doc())
    assert json.loads(capsys.readouterr().out)["results"][0]["subject"] == "timex-v4"
    assert not Path("-").exists()


# ---- peak memory ---------------------------------------------------------------------------------------

def test_peak_memory_travels_through_json_csv_and_markdown():
    from dataclasses import replace

    from cudabench.results.exporters.json_document import result_from_dict, result_to_dict

    timed = replace(measured("timex", SHAPE, "timex-v4", 20e-6, n=20), peak_memory=75 << 20)
    unmeasured = measured("timex", SHAPE, "conv1d", 4.47e-3, role="baseline")
    assert result_from_dict(result_to_dict(timed)).peak_memory == 75 << 20
    assert result_from_dict({k: v for k, v in result_to_dict(timed).items() if k != "peak_memory"}).peak_memory == -1
    document = doc([timed, unmeasured])
    rows = list(csv.DictReader(io.StringIO(to_csv(document))))
    assert rows[0]["peak_memory"] == str(75 << 20) and rows[1]["peak_memory"] == ""
    lines = [line for line in to_markdown(document).splitlines() if line.startswith("|")]
    assert "peak memory" in lines[0] and "| 75.0 MiB |" in lines[2] and "| 75.0 MiB |" not in lines[3]


@pytest.mark.parametrize("count, text", [(None, "-"), (-1, "-"), (0, "0 B"), (512, "512 B"), (1536, "1.50 KiB"),
                                         (96 << 20, "96.0 MiB"), (int(1.25 * (1 << 30)), "1.25 GiB"),
                                         (300 << 20, "300 MiB")])
def test_bytes_are_shown_in_binary_units(count, text):
    from cudabench.results.units import fmt_bytes

    assert fmt_bytes(count) == text


def test_markdown_strikes_through_the_figures_of_an_untrusted_subject():
    from dataclasses import replace

    from cudabench.results.records.model import IntegrityCheck

    shape = {"B": 32, "C": 768, "T": 768}
    bad = replace(measured("timex", shape, "hostile-cached", 1.31e-6),
                  integrity=(IntegrityCheck("fresh-output", "fail", "stale"),))
    lines = to_markdown(doc([measured("timex", shape, "timex-v4", 50.6e-6), bad])).splitlines()
    honest = next(line for line in lines if "| timex-v4 |" in line)
    cached = next(line for line in lines if "| hostile-cached |" in line)
    assert "50.6" in honest and "~~" not in honest
    assert "| INVALID |" in cached and "~~1.31 µs~~" in cached and "| 1.31 µs |" not in cached


def test_the_copies_written_during_a_run_read_as_the_whole_document_and_encode_each_result_once(monkeypatch):
    import json

    from cudabench.results.exporters import json_document
    from cudabench.results.exporters.json_document import DocumentText, json_safe

    results = [{"subject": "a", "samples": [1.0, 2.0]}, {"subject": "b", "error": float("nan"), "x": [float("inf")]},
               {"subject": 'c "results": []', "samples": []}]
    doc = {"schema": SCHEMA, "command": 'cudabench run "results": []', "results": []}
    encoded = []
    real = json_document.json_text
    monkeypatch.setattr(json_document, "json_text", lambda d, compact=False: encoded.append(d) or real(d, compact))
    text = DocumentText()
    for n in range(len(results) + 1):
        whole = {**doc, "results": results[:n]}
        assert json.loads(text(whole)) == json.loads(json.dumps(json_safe(whole)))
    assert sum(1 for d in encoded if d in results) == len(results)  # each result encoded once
    assert json.loads(text({**doc, "results": results}))["results"][1]["error"] == "nan"
