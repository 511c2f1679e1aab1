"""Suites through the command line (planning, timing precedence) and the compare / plot commands
on synthetic results files."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cudabench.cli.app import app
from cudabench.engine.suite_file import TimingPolicy, load_suite
from cudabench.results.exporters.json_document import write_json_atomic
from cudabench.engine.plan import RunOptions
from cudabench.engine.request import effective_timing
from cudabench.engine.suite import plan_suite
from synthetic import doc, measured, timex_sweep

CONFIGS = Path(__file__).parent.parent / "configs"
runner = CliRunner()


def test_command_line_over_suite_over_defaults():
    suite = TimingPolicy(timing="events", repeat=30, noise=0.01)
    none = TimingPolicy()
    assert effective_timing(none, suite) == TimingPolicy("events", False, 30, None, 0.01, 2.0, "10ms", 300.0)
    assert effective_timing(TimingPolicy(timing="cupti", min_time=1.0), suite) == TimingPolicy(
        "cupti", False, None, 1.0, 0.01, 2.0, "10ms", 300.0)
    assert effective_timing(none, None) == TimingPolicy("sync", False, None, None, 0.005, 2.0, "10ms", 300.0)


def test_the_sweep_plans_every_shape_and_skips_what_cannot_run(registry, tmp_path):
    tasks = plan_suite(registry, load_suite(CONFIGS / "timex-sweep.toml"), RunOptions())
    shapes = [dict(t.cases[0].shape) for t in tasks]
    assert {s["T"] for s in shapes if s["B"] == 32} == {64, 128, 256, 512, 768, 1024}
    assert {s["B"] for s in shapes if s["T"] == 768} == {8, 16, 32, 64}
    assert all(t.cases[0].direction == "fwd" and [b.name for b in t.baselines] == ["conv1d"] for t in tasks)
    odd = tmp_path / "odd.toml"
    odd.write_text('[[case]]\nkernels = ["timex-v4"]\nshape = { B = [8, 12], T = 64 }\n')
    planned = plan_suite(registry, load_suite(odd), RunOptions())
    assert [len(t.variants) for t in planned] == [1, 0]  # B=12 breaks B % 8: a skip, not a stop
    assert "B must be a multiple of 8" in planned[1].skipped[0][1]


def test_run_needs_a_kernel_or_a_config_and_reports_a_broken_config(tmp_path):
    res = runner.invoke(app, ["run"])
    assert res.exit_code == 2 and "--config FILE" in res.output
    bad = tmp_path / "bad.toml"
    bad.write_text('[[case]]\nkernels = ["timex"]\nshape = { T = "long" }\n')
    res = runner.invoke(app, ["run", "--config", str(bad)])
    assert res.exit_code == 2 and "bad.toml" in res.output and "case[1].shape.T" in res.output
    assert "Traceback" not in res.output


def write(tmp_path, name, document):
    path = tmp_path / name
    write_json_atomic(path, document)
    return path


def test_compare_same_runs_exit_0(tmp_path):
    old, new = write(tmp_path, "old.json", timex_sweep()), write(tmp_path, "new.json", timex_sweep())
    res = runner.invoke(app, ["compare", str(old), str(new)])
    assert res.exit_code == 0, res.output
    assert "same" in res.output and "slower" not in res.output


def test_compare_names_a_regression_and_exits_1(tmp_path):
    shape = {"B": 32, "C": 768, "T": 768}
    old = doc([measured("timex", shape, "timex-v4", 1e-3, seed=1), measured("timex", shape, "conv1d", 4e-3, "baseline", seed=2)])
    new = doc([measured("timex", shape, "timex-v4", 1.3e-3, seed=3), measured("timex", shape, "conv1d", 4e-3, "baseline", seed=4)])
    res = runner.invoke(app, ["compare", str(write(tmp_path, "a.json", old)), str(write(tmp_path, "b.json", new)),
                              "--threshold", "10%"])
    assert res.exit_code == 1
    assert "regression" in res.output and "timex-v4" in res.output.split("regression")[-1]


def test_compare_refuses_a_file_that_is_not_results(tmp_path):
    other = tmp_path / "x.json"
    other.write_text(json.dumps({"hello": 1}))
    res = runner.invoke(app, ["compare", str(other), str(other)])
    assert res.exit_code == 2 and "x.json" in res.output


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    results = write(tmp_path, "sweep.json", timex_sweep())
    res = runner.invoke(app, ["plot", str(results), "-o", str(tmp_path / "sweep.png")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_to_an_unknown_format_is_a_message(tmp_path):
    pytest.importorskip("matplotlib")
    results = write(tmp_path, "sweep.json", timex_sweep())
    res = runner.invoke(app, ["plot", str(results), "-o", str(tmp_path / "sweep.xyz")])
    assert res.exit_code == 2 and "Cannot write the plot" in res.output and "Traceback" not in res.output


def test_ceilings_without_a_figure_give_no_share():
    from cudabench.measure.ceilings import Ceilings

    c = Ceilings("gpu", "drv", copy_bytes_per_s=3e12, sgemm_flops=5e13, fma_flops=0.0, measured="today")
    assert c.of("fma", 1e9, 0, 1e-3) is None
    assert c.of("memory", 0, 3e9, 1e-3) == pytest.approx(1.0)


def test_a_suite_that_plans_too_many_subject_runs_is_refused_with_the_numbers(registry, monkeypatch, tmp_path):
    from cudabench.engine import suite as suite_module
    from cudabench.errors import ConfigError

    monkeypatch.setattr(suite_module, "MAX_SUBJECTS", 40)
    with pytest.raises(ConfigError, match=r"plans more than 40 subject runs .* at case 2 of 2"):
        plan_suite(registry, load_suite(CONFIGS / "timex-sweep.toml"), RunOptions())
    monkeypatch.setattr(suite_module, "MAX_SUBJECTS", 100)
    assert len(plan_suite(registry, load_suite(CONFIGS / "timex-sweep.toml"), RunOptions())) == 9
