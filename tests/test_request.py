"""A run's settings resolved once (cudabench.engine.request): the command line over a suite file over
the defaults, the defaults being the stop rule's and warm-up's own, into the options workers get; the
command line, suite files and the Python API share the bounds and the resolution."""

import pytest
from typer.testing import CliRunner

from cudabench.cli.app import app
from cudabench.engine.request import DEFAULTS, checked, effective_timing, run_options
from cudabench.engine.suite_file import TimingPolicy
from cudabench.errors import ConfigError, ShapeError
from cudabench.measure.loop import Warmup
from cudabench.measure.stop import Adaptive, FixedCount, MinTime


def test_the_defaults_are_the_stop_rule_and_warm_up_defaults():
    options = run_options(effective_timing(TimingPolicy()))
    assert options.rule == Adaptive() and options.warmup == Warmup() and options.timing == "sync"
    assert DEFAULTS["noise"] == Adaptive().target and DEFAULTS["max_time"] == Adaptive().max_time


def test_the_command_line_wins_over_the_suite_which_wins_over_the_defaults():
    suite = TimingPolicy(timing="events", noise=0.01, warmup="25")
    options = run_options(effective_timing(TimingPolicy(noise=0.002), suite), seed=7)
    assert options.timing == "events" and options.rule == Adaptive(target=0.002, max_time=2.0)
    assert options.warmup == Warmup(25, 0.0) and options.seed == 7
    assert run_options(effective_timing(TimingPolicy(min_time=0.5), TimingPolicy(repeat=30))).rule == MinTime(0.5)
    assert run_options(effective_timing(TimingPolicy(), TimingPolicy(repeat=30))).rule == FixedCount(30)


def test_repeat_and_min_time_together_are_refused():
    with pytest.raises(ShapeError, match="alternatives"):
        run_options(effective_timing(TimingPolicy(repeat=5, min_time=1.0)))


def test_one_set_of_bounds_names_the_setting_as_its_caller_writes_it():
    with pytest.raises(ConfigError, match="--noise must be positive"):
        checked(TimingPolicy(noise=-0.5))
    with pytest.raises(ConfigError, match="max_time must be positive"):
        checked(TimingPolicy(max_time=-1.0), lambda key: key)


def test_the_help_shows_the_defaults_it_resolves_with():
    shown = " ".join(CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "200"}).output.split())
    for text in (f"default {DEFAULTS['noise']:g})", f"(default {DEFAULTS['max_time']:g})",
                 f"(default {DEFAULTS['warmup']})", f"(default {DEFAULTS['timeout']:g})"):
        assert text in shown


@pytest.mark.parametrize("name", ["sync", "events", "graph", "cupti"])
def test_one_list_of_timers_feeds_the_help_validation_and_labels(name, tmp_path):
    """TIMINGS (results/records/model.py) is the one list: --help, a suite file's and the command
    line's validation, the output's timing line, the table's median heading and the timers themselves."""
    import sys

    from rich.console import Console

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from synthetic import measured

    from cudabench.measure.timers import TIMERS
    from cudabench.results.records.model import TIMINGS
    from cudabench.results.report import terminal

    timing = TIMINGS[name]
    assert set(TIMERS) == set(TIMINGS) and DEFAULTS["timing"] == next(iter(TIMINGS))
    shown = " ".join(CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "200"}).output.split())
    assert f"{name}{' (default)' if name == DEFAULTS['timing'] else ''}: {timing.brief}" in shown
    assert checked(TimingPolicy(timing=name)).timing == name
    with pytest.raises(ConfigError) as refused:
        checked(TimingPolicy(timing=name + "x"))
    assert all(n in str(refused.value.message) for n in TIMINGS)
    console = Console(width=130, record=True)
    for table in terminal.tables([measured("add2", {"n": 1024}, "add2", 1e-5, timing=name)]):
        console.print(table)
    assert timing.label in console.export_text()
