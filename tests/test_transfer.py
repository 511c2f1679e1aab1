"""compare-transfer's logic without a GPU: sizes, which methods are measurements, the tables and
the command's errors."""

import pytest
import torch
from rich.console import Console
from typer.testing import CliRunner

from cudabench.cli.app import app
from cudabench.cli.lessons import parse_size
from cudabench.errors import ShapeError
from cudabench.measure.transfer import METHODS, CopyResult, Overlap, is_valid
from cudabench.results.report.lesson_tables import overlap_table, transfer_table


@pytest.mark.parametrize("text, size", [("1MB", 10**6), ("256MiB", 256 << 20), ("1GB", 10**9), ("4096", 4096),
                                        ("2^20", 1 << 20), ("1.5 GB", 1_500_000_000), ("64kib", 64 << 10),
                                        ("2.01MB", 2_010_000), ("0.5KiB", 512)])
def test_sizes_in_decimal_and_binary_units(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "1TB", "MB", "-1MB", "0", "17GB", "one", "1e9", "1.9", "1.2.3MB"])
def test_bad_sizes_are_user_errors(text):
    with pytest.raises(ShapeError):
        parse_size(text)


def test_only_a_clock_around_a_non_blocking_copy_is_not_a_measurement():
    assert [is_valid(m, True) for m in METHODS] == [True, True, False]
    assert all(is_valid(m, False) for m in METHODS)  # the call itself waits for a blocking copy


def copy(method, non_blocking, seconds, pinned=True, size=10**9):
    return CopyResult(size, pinned, non_blocking, method, is_valid(method, non_blocking), (seconds,) * 3)


def test_table_marks_the_wrong_figure_and_measures_the_link_from_valid_ones_only():
    rows = [copy("events", True, 0.02), copy("host clock only", True, 1e-5),   # 50 GB/s; 100 TB/s: queued only
            copy("events", False, 0.1, pinned=False)]                          # pageable: 10 GB/s
    console = Console(record=True, width=200)
    console.print(transfer_table(rows))
    text = console.export_text()
    assert "link peak measured here: 50.0 GB/s" in text
    assert "100000.0" in text and "NO: the copy may still be running" in text
    assert "20%" in text and "100%" in text  # the pageable copy against the pinned peak


def test_overlap_table_shows_what_the_second_stream_saves():
    console = Console(record=True, width=200)
    console.print(overlap_table(Overlap(256 * 10**6, 5e-3, 5e-3, "3× float32 matmul 2048²", (0.010,) * 3,
                                        (0.006,) * 3)))
    text = console.export_text()
    assert "copy 256 MB" in text and "10.00 ms" in text and "6.000 ms" in text and "40%" in text


def test_cli_bad_size_and_no_gpu_are_one_paragraph(monkeypatch):
    res = CliRunner().invoke(app, ["compare-transfer", "--sizes", "1MB,lots"])
    assert res.exit_code == 2 and "Cannot read the size 'lots'" in res.output and "Traceback" not in res.output
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    res = CliRunner().invoke(app, ["compare-transfer"])
    assert res.exit_code != 0 and "Traceback" not in res.output and "GPU" in res.output
