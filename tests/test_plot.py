"""`cudabench plot`'s logic: which parameter a sweep runs along, the lines and speedups drawn,
a real PNG written, and clear errors without matplotlib or without a sweep."""

import sys

import pytest

from cudabench.errors import ConfigError, ToolNotFoundError
from cudabench.results.plot import plot_sweep, speedups, sweep_axes, sweep_panels
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
