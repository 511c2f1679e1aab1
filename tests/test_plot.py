"""`cudabench plot`'s logic: which parameter a sweep runs along, the lines and speedups drawn,
a real PNG written, and clear errors without matplotlib or without a sweep."""

import sys
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from cudabench.cli.app import app
from cudabench.errors import ConfigError, ToolNotFoundError
from cudabench.results.exporters.json_document import write_json_atomic
from cudabench.results.records.model import IntegrityCheck
from cudabench.results.plots.sweep import plot_sweep, speedups, sweep_axes, sweep_panels
from synthetic import doc, measured, skipped, timex_sweep

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_sweep_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    out = plot_sweep(timex_sweep(), tmp_path / "plots" / "sweep.png")
    assert out == tmp_path / "plots" / "sweep.png"
    assert out.read_bytes()[:8] == PNG_MAGIC and out.stat().st_size > 10_000


def test_each_swept_parameter_gets_its_panel_with_a_line_per_subject():
    panels = sweep_panels(timex_sweep())
    assert [(p.family, p.axis, p.fixed) for p in panels] == [
        ("timex", ("T",), "B=32, C=768"), ("timex", ("B",), "C=768, T=768")]
    t_panel = panels[0]   # T = 768 at B = 32 comes from the B sweep: it lies on the T line too
    assert [line.label for line in t_panel.lines] == ["timex-v3", "timex-v4", "conv1d"]
    assert [x for x, _ in t_panel.lines[0].points] == [64, 128, 256, 512, 768, 1024]
    assert t_panel.lines[2].role == "baseline"


def test_speedup_is_baseline_over_variant_at_each_x():
    name, lines = speedups(sweep_panels(timex_sweep())[0])
    assert name == "conv1d"
    by_label = {line.label: pts for line, pts in lines}
    assert set(by_label) == {"timex-v3", "timex-v4"}
    assert [x for x, _ in by_label["timex-v4"]] == [64, 128, 256, 512, 768, 1024]
    assert all(s == pytest.approx(4.5, rel=0.01) for _, s in by_label["timex-v4"])


def test_parameters_that_move_together_are_one_axis():
    shapes = [{"M": m, "N": m, "K": 256} for m in (512, 1024, 2048)]
    assert sweep_axes(shapes) == [("M", "N")]
    grid = [{"B": b, "T": t} for b in (8, 16) for t in (64, 128, 256)]
    assert sweep_axes(grid) == [("T",), ("B",)]   # most distinct values first


def test_a_grid_draws_a_labelled_line_per_value_of_the_other_parameter():
    results = [measured("timex", {"B": b, "T": t}, "timex-v4", b * t * 1e-9, direction=d, seed=b + t)
               for b in (8, 16) for t in (64, 128, 256) for d in ("fwd", "fwdbwd")]
    panel = sweep_panels(doc(results), parameter="T")[0]
    assert panel.axis == ("T",)
    assert [line.label for line in panel.lines] == [
        "timex-v4 fwd (B=8)", "timex-v4 fwdbwd (B=8)", "timex-v4 fwd (B=16)", "timex-v4 fwdbwd (B=16)"]


def test_unmeasured_results_are_left_out():
    results = list(timex_sweep()["results"])
    extra = doc([skipped("timex", {"B": 32, "C": 768, "T": 66}, "timex-v3")])["results"]
    panels = sweep_panels({**timex_sweep(), "results": results + extra})
    assert [x for x, _ in panels[0].lines[0].points] == [64, 128, 256, 512, 768, 1024]


def test_not_a_sweep_is_a_config_error():
    single = doc([measured("timex", {"B": 32, "C": 768, "T": 768}, "timex-v4", 1e-3)])
    with pytest.raises(ConfigError, match="Nothing to plot"):
        sweep_panels(single)
    with pytest.raises(ConfigError, match="parameter 'C'"):
        sweep_panels(timex_sweep(), parameter="C")


def test_missing_matplotlib_says_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)   # makes `import matplotlib` fail
    with pytest.raises(ToolNotFoundError) as info:
        plot_sweep(timex_sweep(), tmp_path / "x.png")
    assert 'pip install "cudabench[plot]"' in info.value.hint
    assert not (tmp_path / "x.png").exists()


def test_invalid_and_crashed_results_are_not_drawn():
    results = [measured("timex", {"T": t}, "timex-v4", t * 1e-8, seed=t) for t in (64, 128, 256)]
    results[1] = replace(results[1], integrity=(IntegrityCheck("stale-output", "fail", "error 1.1"),))
    results[2] = replace(results[2], error="hung")
    results += [measured("timex", {"T": t}, "conv1d", t * 1e-8, role="baseline", seed=t) for t in (64, 128, 256)]
    (panel,) = sweep_panels(doc(results))
    assert [(line.label, [x for x, _ in line.points]) for line in panel.lines] == [("conv1d", [64, 128, 256])]


# ---- plot -o: exactly the path given ---------------------------------------------------------------------

runner = CliRunner()


def plot_cli(tmp_path, output):
    pytest.importorskip("matplotlib")
    results = tmp_path / "sweep.json"
    write_json_atomic(results, timex_sweep())
    res = runner.invoke(app, ["plot", str(results), "-o", str(output)])
    assert "Traceback" not in res.output and (res.exception is None or isinstance(res.exception, SystemExit))
    return res


def said(res):
    """The output as one line: the console wraps long messages."""
    return " ".join(res.output.split())


def test_cli_a_folder_is_refused(tmp_path):
    res = plot_cli(tmp_path, tmp_path)
    assert res.exit_code == 2 and f"Cannot write the plot to {tmp_path}: it names a folder" in said(res)
    assert not tmp_path.with_suffix(".png").exists()


def test_cli_a_path_ending_in_a_slash_is_a_folder(tmp_path):
    res = plot_cli(tmp_path, f"{tmp_path}/plots/")
    assert res.exit_code == 2 and "it names a folder" in said(res) and not (tmp_path / "plots").exists()


def test_cli_writes_exactly_the_path_given(tmp_path):
    res = plot_cli(tmp_path, tmp_path / "sweep")
    assert res.exit_code == 0 and said(res) == f"wrote {tmp_path / 'sweep'}"
    assert (tmp_path / "sweep").read_bytes()[:8] == PNG_MAGIC and not (tmp_path / "sweep.png").exists()


def test_cli_the_suffix_picks_the_format(tmp_path):
    res = plot_cli(tmp_path, tmp_path / "sweep.SVG")
    assert res.exit_code == 0 and b"<svg" in (tmp_path / "sweep.SVG").read_bytes()[:500]


def test_cli_an_unknown_suffix_says_which_work(tmp_path):
    res = plot_cli(tmp_path, tmp_path / "sweep.jpeg2")
    assert res.exit_code == 2 and "matplotlib does not write .jpeg2 files" in said(res)
    assert ".png" in said(res) and ".svg" in said(res) and ".pdf" in said(res)
    assert not list(tmp_path.glob("*sweep.jpeg2*"))


def test_cli_a_device_is_refused(tmp_path):
    res = plot_cli(tmp_path, "/dev/null")
    assert res.exit_code == 2 and "it is a character device" in said(res)


def test_cli_writes_through_a_symlink(tmp_path):
    (tmp_path / "latest.png").symlink_to("2024-06-01.png")
    res = plot_cli(tmp_path, tmp_path / "latest.png")
    assert res.exit_code == 0 and (tmp_path / "latest.png").is_symlink()
    assert (tmp_path / "2024-06-01.png").read_bytes()[:8] == PNG_MAGIC


def test_cli_dash_writes_the_png_to_standard_output(tmp_path):
    res = plot_cli(tmp_path, "-")
    assert res.exit_code == 0 and res.stdout_bytes[:8] == PNG_MAGIC and not (tmp_path / "-").exists()


def test_peak_memory_gets_its_own_row_of_panels(tmp_path, monkeypatch):
    """With peak memory recorded, a third row draws it against the swept parameter (N² against N
    shows as slopes 2 and 1 on the log axes); without it, two rows as before."""
    pytest.importorskip("matplotlib")
    from cudabench.results.plots import sweep as plot

    doc_with = timex_sweep()
    for r in doc_with["results"]:
        r["peak_memory"] = r["case"]["shape"]["T"] ** 2 * (64 if r["subject"] == "conv1d" else 4)
    drawn = []
    real = plot._draw_memory
    monkeypatch.setattr(plot, "_draw_memory", lambda ax, panel: (drawn.append(panel), real(ax, panel)))
    plot_sweep(doc_with, tmp_path / "with.png")
    assert [p.axis for p in drawn] == [("T",), ("B",)] and all(plot.has_memory(p) for p in drawn)
    drawn.clear()
    plot_sweep(timex_sweep(), tmp_path / "without.png")
    assert drawn == []
