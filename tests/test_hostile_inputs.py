"""Issue 11: hostile inputs on a CPU machine. Every one ends in one clear paragraph and a non-zero
exit (0 only where the command succeeded), never a traceback, and text from users, files and tools
is printed verbatim."""

import json
import time

import pytest
import torch
from typer.testing import CliRunner

from cudabench.cli.app import app
from synthetic import doc, measured

runner = CliRunner()


def invoke(*args):
    res = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in res.output and not isinstance(res.exception, (AttributeError, TypeError, KeyError))
    return res


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def write(path, data):
    path.write_text(json.dumps(data))
    return path


# ---- markup: brackets in names, shapes and messages are text -----------------------------------------

def test_a_name_with_markup_is_printed_verbatim():
    res = invoke("run", "--kernel", "add2[/x]")
    assert res.exit_code == 2 and "add2[/x]" in res.output


def test_compare_shows_the_shape_of_each_case(tmp_path):
    old = write(tmp_path / "old.json", doc([measured("add2", {"n": 1048576}, "add2", 1e-3, seed=1)]))
    new = write(tmp_path / "new.json", doc([measured("add2", {"n": 1048576}, "add2", 1e-3, seed=2)]))
    res = invoke("compare", old, new)
    assert res.exit_code == 0 and "add2[n=1048576]/fwd" in res.output


# ---- numbers on the command line: the suite files' bounds, a bounded power syntax -----------------

@pytest.mark.parametrize("args, fragment", [
    (["--min-time", "-1"], "--min-time must be positive (got -1)"),
    (["--noise", "-0.5"], "--noise must be positive (got -0.5)"),
    (["--noise", "3"], "--noise must be at most 1"),
    (["--max-time", "0"], "--max-time must be positive (got 0)"),
    (["--max-time", "1e12"], "--max-time must be at most 86400 seconds"),
    (["--timeout", "-3"], "--timeout must be positive"),
    (["--repeat", "0"], "--repeat must be positive (got 0)"),
    (["--warmup", "-5ms"], "--warmup: expected a number of calls"),
    (["--warmup", "2.5"], "--warmup: expected a whole number of calls"),
    (["--warmup", "0"], "--warmup must be positive"),
    (["--shape", "n=-8"], "n must not be negative (got -8)"),
    (["--shape", "n=2^64"], "is not a whole number below 2^63"),
    (["--shape", "n=99999999999999999999999"], "is not a whole number below 2^63"),
])
def test_bad_numbers_on_the_command_line_exit_2_with_the_bound(no_gpu, args, fragment):
    res = invoke("run", "--kernel", "add2", *args)
    assert res.exit_code == 2 and fragment in res.output, res.output


def test_a_huge_power_is_refused_at_once(no_gpu):
    start = time.monotonic()
    res = invoke("run", "--kernel", "add2", "--shape", "n=10^100000000")
    assert res.exit_code == 2 and "not a whole number below 2^63" in res.output
    assert time.monotonic() - start < 5


@pytest.mark.parametrize("option", [["--iters", "-3"], ["--busy-ms", "-1"], ["--warmup", "-2"], ["--show", "-1"],
                                    ["--seed", "-1"]])
def test_sync_mode_numbers_are_bounded(no_gpu, option):
    res = invoke("compare-sync-modes", *option)
    assert res.exit_code == 2 and "Invalid value" in res.output


# ---- names and specs -----------------------------------------------------------------------------

def test_a_suggestion_names_each_kernel_once(no_gpu):
    res = invoke("run", "--kernel", "ad2")
    assert res.exit_code == 2 and "add2, add2," not in res.output and "add2" in res.output


def test_a_spec_that_raises_names_its_line_and_traceback_shows_it(tmp_path):
    family = tmp_path / "broken"
    family.mkdir()
    (family / "spec.py").write_text("import math\n\nvalue = 1\nraise RuntimeError('my bug')\n")
    res = invoke("list", "--kernels-dir", tmp_path)
    assert res.exit_code == 2 and f"{family / 'spec.py'}:4" in res.output and "my bug" in res.output
    assert "Traceback" not in res.output
    full = runner.invoke(app, ["--traceback", "list", "--kernels-dir", str(tmp_path)])
    assert full.exit_code == 2 and "Traceback" in full.output and "RuntimeError: my bug" in full.output


def test_a_spec_with_a_syntax_error_names_its_line(tmp_path):
    family = tmp_path / "typo"
    family.mkdir()
    (family / "spec.py").write_text("x = 1\ny = (\n")
    res = invoke("list", "--kernels-dir", tmp_path)
    assert res.exit_code == 2 and f"{family / 'spec.py'}:2" in res.output


# ---- conventions ---------------------------------------------------------------------------------

def test_version_and_short_help():
    from cudabench import __version__

    res = invoke("--version")
    assert res.exit_code == 0 and res.output.strip() == f"cudabench {__version__}"
    res = invoke("run", "-h")
    assert res.exit_code == 0 and "Usage" in res.output and "Examples:" in res.output
    assert "cudabench run --kernel timex-v4" in res.output


@pytest.mark.parametrize("command", ["list", "doctor", "build", "check", "run", "compare", "plot",
                                     "compare-sync-modes", "profile"])
def test_every_command_shows_examples(command):
    res = invoke(command, "--help")
    assert res.exit_code == 0 and "Examples:" in res.output and f"cudabench {command}" in res.output


def test_completion_can_be_installed():
    res = invoke("--help")
    assert "--install-completion" in res.output and "--quiet" in res.output and "--traceback" in res.output


def test_quiet_keeps_errors():
    res = invoke("--quiet", "run", "--kernel", "nope")
    assert res.exit_code == 2 and "error:" in res.output


@pytest.mark.parametrize("command", [["build", "--all", "--check"], ["run", "-k", "add2"]])
def test_a_bad_arch_is_a_usage_error(no_gpu, command):
    res = invoke(*command, "--arch", "sm_9x")
    assert res.exit_code == 2 and "Cannot read the GPU architecture 'sm_9x'" in res.output


def test_profile_iterations_are_bounded(no_gpu):
    res = invoke("profile", "-k", "add2", "--iters", "-3")
    assert res.exit_code == 2 and "Invalid value" in res.output


# ---- planning: a variant without a backward is skipped, not run ----------------------------------

def test_a_variant_without_backward_is_skipped_at_planning_for_backward_directions():
    from dataclasses import replace

    from cudabench.engine.plan import RunOptions, plan, skips, subjects
    from cudabench.spec.registry import discover

    task = plan(discover([]), ["timex-v4"], {}, RunOptions(directions=("fwd", "fwdbwd"), baselines=()))[0]
    task = replace(task, variants=(replace(task.variants[0], has_backward=False),))
    fwd, fwdbwd = task.cases
    assert [s.name for s in subjects(task, fwd)] == ["timex-v4"] and skips(task, fwd) == []
    assert subjects(task, fwdbwd) == []
    [(name, role, reason)] = skips(task, fwdbwd)
    assert name == "timex-v4" and reason.startswith("constraint:") and "no backward" in reason


# ---- outputs: - is standard output, nothing is created before a run can start -------------------

def test_run_outputs_to_stdout_once_at_the_end(tmp_path, capsys):
    from cudabench.cli.common import out
    from cudabench.cli.run_outputs import Outputs
    from synthetic import doc as document

    outputs = Outputs(json=__import__("pathlib").Path("-"), csv=tmp_path / "deep" / "r.csv", markdown=None)
    outputs.check()
    assert not (tmp_path / "deep").exists()  # nothing created before the run
    data = document([measured("add2", {"n": 1024}, "add2", 1e-3)])
    outputs.save(data)
    assert capsys.readouterr().out == "" and (tmp_path / "deep" / "r.csv").is_file()
    with outputs.tables_elsewhere():
        out.print("a table")
        outputs.save(data, final=True)
    captured = capsys.readouterr()
    assert json.loads(captured.out)["results"][0]["subject"] == "add2" and "a table" in captured.err


@pytest.mark.parametrize("args, fragment", [
    (["--json", "-", "--csv", "-"], "Only one of --json, --csv and --markdown"),
    (["--json", "."], "it is a folder"),
    (["--json", "/proc/cannot/x.json"], "Cannot write"),
])
def test_run_output_mistakes_come_first(no_gpu, args, fragment):
    res = invoke("run", "-k", "add2", *args)
    assert res.exit_code == 2 and fragment in res.output, res.output


def test_a_suite_hint_keeps_its_brackets(tmp_path, no_gpu):
    suite = tmp_path / "suite.toml"
    suite.write_text('name = "x"\n')
    res = invoke("run", "--config", suite)
    assert res.exit_code == 2 and "at least one [[case]] table" in res.output and "[[case]]\nkernels" in res.output


@pytest.mark.parametrize("args", [
    ["compare", "{A}", "{A}", "--json", "{A}"],
    ["compare", "{A}", "{A}", "--markdown", "{L}"],          # a symlink to the input
    ["report", "--html", "{A}", "--results", "{A}"],
    ["plot", "{A}", "-o", "{P}"],                            # an image path that is a link to the input
    ["run", "--config", "{S}", "--json", "{S}"],
    ["run", "--config", "{S}", "--csv", "{A}", "--json", "{A}"],   # two outputs, one file
    ["compare", "{A}", "{A}", "--json", "/proc/x.json"],
])
def test_no_command_writes_over_its_own_input_or_where_it_cannot(tmp_path, args):
    a, s = tmp_path / "A.json", tmp_path / "s.toml"
    a.write_text('{"schema": "cudabench.results"}')
    s.write_text('[[case]]\nkernels = ["add2"]\n')
    (tmp_path / "L.json").symlink_to(a)
    (tmp_path / "P.png").symlink_to(a)
    before = {p: p.read_bytes() for p in (a, s)}
    res = invoke(*[x.format(A=a, L=tmp_path / "L.json", P=tmp_path / "P.png", S=s) for x in args])
    assert res.exit_code == 2 and ("would overwrite" in res.output or "same file" in res.output
                                   or "Cannot write /proc" in res.output), res.output
    assert {p: p.read_bytes() for p in (a, s)} == before and "Traceback" not in res.output
