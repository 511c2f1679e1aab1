"""The run table: whole names and whole figures at 80, 100 and 130 columns; every figure one flag
(--wide) away; `cudabench show` prints a results file the way `run` did."""

from dataclasses import replace

import pytest
from rich.console import Console
from typer.testing import CliRunner

from cudabench.cli.app import app
from cudabench.results import units
from cudabench.results.report import terminal as report
from cudabench.results.exporters.json_document import write_json_atomic
from cudabench.results.records.model import IntegrityCheck
from synthetic import doc, measured

SHAPE = {"B": 32, "C": 768, "T": 768}
NAMES = [("timex-v1", 9.1e-3), ("timex-v4", 1.234e-3), ("timex-fft", 134e-6), ("timex-mma", 74e-6)]


def results():
    rs = []
    for d in ("fwd", "fwdbwd"):
        rs += [measured("timex", SHAPE, name, median, direction=d) for name, median in NAMES]
        rs += [measured("timex", SHAPE, "conv1d", 4.47e-3, role="baseline", direction=d),
               measured("timex", SHAPE, "torch-compile", 3.1e-3, role="baseline", direction=d)]
    rs.append(replace(measured("timex", SHAPE, "hostile-side-stream", 1.31e-6),
                      integrity=(IntegrityCheck("stream-order", "fail", "work on a private stream"),)))
    rs.append(measured("timex", SHAPE, "sdpa-efficient", 2e-3, role="baseline"))
    return rs


def render(rs, width, wide=False):
    console = Console(width=width, record=True, highlight=False, markup=False)
    for table in report.tables(rs, wide):
        console.print(table)
    return console.export_text()


@pytest.mark.parametrize("width", [80, 100, 130])
def test_names_and_medians_are_whole_at_every_width(width):
    rs = results()
    text = render(rs, width)
    lines = text.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= width
    for r in rs:
        row = [line for line in lines if f" {r.subject} " in line and f" {r.case.direction} " in line]
        assert row, (r.subject, text)  # the whole name, on one line with its direction
        if r.status == "ok":
            assert units.fmt_time(r.stats.median) in row[0]  # the whole median on that same line
        else:
            assert r.status in row[0] and units.fmt_time(r.stats.median) not in row[0]  # no untrusted figure
    assert "median/call ±95%" in text and "vs conv1d" in text and "status" in text


def test_the_default_is_what_a_reader_decides_with_and_wide_has_every_figure():
    rs = results()
    compact, wide = render(rs, 130), render(rs, 250, wide=True)
    for header in ("IQR", "TFLOP/s", "GB/s", "rel err", "vs torch-compile"):
        assert header not in compact and header in wide
    assert "1.44×" in compact  # torch-compile against conv1d, the first baseline


def test_show_prints_a_results_file_as_run_did(tmp_path):
    path = tmp_path / "r.json"
    write_json_atomic(path, doc(results()))
    res = CliRunner().invoke(app, ["show", str(path)])
    assert res.exit_code == 0, res.output
    for name, _ in NAMES:
        assert name in res.output
    assert "INVALID hostile-side-stream fwd" in res.output and "stream-order" in res.output
    wide = CliRunner().invoke(app, ["show", str(path), "--wide"])
    assert wide.exit_code == 0 and "IQR" in wide.output
    missing = CliRunner().invoke(app, ["show", str(tmp_path / "none.json")])
    assert missing.exit_code == 2 and "Traceback" not in missing.output
    assert "time:" not in res.output  # the file has no run time (an older one, or cut short)
    from cudabench.results.exporters.json_document import document
    from cudabench.results.records.model import RunTime
    from synthetic import ENV

    write_json_atomic(path, document(results(), ENV, run_time=RunTime(30.0, 2, (("start-up", 1.5),))))
    timed = CliRunner().invoke(app, ["show", str(path)])
    assert "time: 30.0 s wall on 2 GPUs (60.0 GPU-seconds)" in timed.output and "start-up 1.5 s" in timed.output


@pytest.mark.parametrize("columns", ["80", "130"])
def test_wide_is_printed_at_its_natural_width_with_names_and_figures_whole(tmp_path, columns):
    """--wide has more columns than a log is wide: it is printed wider than the console (read by
    scrolling), never with a kernel name or a median cut short or wrapped onto a second line."""
    path = tmp_path / "r.json"
    rs = results()
    write_json_atomic(path, doc(rs))
    res = CliRunner().invoke(app, ["show", str(path), "--wide"], env={"COLUMNS": columns})
    assert res.exit_code == 0, res.output
    assert "…" not in res.output
    for r in rs:
        if r.status == "ok":
            row = [line for line in res.output.splitlines() if f" {r.subject} " in line and f" {r.case.direction} " in line]
            assert row and units.fmt_time(r.stats.median) in row[0], (r.subject, res.output)


def test_profile_tables_keep_range_and_kernel_names_whole_in_an_80_column_log():
    """On the H100 at 80 columns the NVTX table cut 'timed timex-v4' and ncu's cut the kernel name:
    tables go out at their natural width."""
    import io
    from types import SimpleNamespace

    from cudabench.console import PlainConsole
    from cudabench.profile import tables

    buffer = io.StringIO()
    console = PlainConsole(file=buffer, width=80, highlight=False, markup=False)
    name = "timed timex-v4-with-a-long-variant-name call"
    console.print_table(tables.range_stat_table([SimpleNamespace(
        name=name, domain="cudabench", count=10, wall_total=4.9e-3, wall_median=4.6e-4, gpu_total=4.4e-3,
        gpu_median=4.4e-4)]))
    text = buffer.getvalue()
    assert name in text and "436.2 µs" not in text and "440.0 µs" in text and "…" not in text
    assert "NVTX ranges (GPU time = kernels launched inside the range)" in text
