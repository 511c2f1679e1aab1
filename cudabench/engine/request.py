"""A run's settings, resolved once: the command line (or the Python API) over a suite file's [timing]
table over the defaults, checked with one set of bounds, into the RunOptions every worker gets. The
defaults are those of the stop rule and warm-up themselves (cudabench.measure.stop.Adaptive,
cudabench.measure.loop.Warmup), written nowhere else; the command line's help reads them from here."""

from __future__ import annotations

from typing import Any, Callable, Optional

from cudabench.engine.plan import DEFAULT_TIMEOUT, RunOptions
from cudabench.engine.suite_file import TimingPolicy, check_timing
from cudabench.engine.suite_values import parse_warmup
from cudabench.errors import ShapeError
from cudabench.measure.loop import Warmup
from cudabench.measure.stop import Adaptive, FixedCount, MinTime, StopRule
from cudabench.results.records.model import TIMINGS

_ADAPTIVE, _WARMUP = Adaptive(), Warmup()
DEFAULTS = {"timing": next(iter(TIMINGS)), "cold": False, "repeat": None, "min_time": None, "noise": _ADAPTIVE.target,
            "max_time": _ADAPTIVE.max_time, "warmup": f"{_WARMUP.seconds * 1e3:g}ms", "timeout": DEFAULT_TIMEOUT}


def checked(policy: TimingPolicy, name: Callable[[str], str] = lambda key: "--" + key.replace("_", "-")) -> TimingPolicy:
    """`policy` with each value it sets checked by the suite files' bounds; `name` says how an error
    names a setting (an option, a keyword argument)."""
    return check_timing(policy, name)


def effective_timing(command_line: TimingPolicy, suite: Optional[TimingPolicy] = None) -> TimingPolicy:
    """Every setting filled: the command line's where it says something, else the suite's, else the
    default. A suite's repeat or min_time gives way when the command line names the other."""
    given = suite.given() if suite else {}
    if command_line.repeat is not None or command_line.min_time is not None:
        given = {k: v for k, v in given.items() if k not in ("repeat", "min_time")}
    return TimingPolicy(**{**DEFAULTS, **given, **command_line.given()})


def stop_rule(policy: TimingPolicy) -> StopRule:
    if policy.repeat is not None and policy.min_time is not None:
        raise ShapeError("--repeat and --min-time are alternatives: give one.")
    if policy.repeat is not None:
        return FixedCount(policy.repeat)
    if policy.min_time is not None:
        return MinTime(policy.min_time)
    return Adaptive(target=policy.noise, max_time=policy.max_time)


def run_options(policy: TimingPolicy, **choices: Any) -> RunOptions:
    """The run's options from a resolved policy (effective_timing) and the choices that are not
    timing (directions, baselines, seed, ...): the one place a setting takes its worker's form."""
    return RunOptions(timing=policy.timing, cold=policy.cold, rule=stop_rule(policy),
                      warmup=Warmup(*parse_warmup(policy.warmup)), timeout=policy.timeout, **choices)
