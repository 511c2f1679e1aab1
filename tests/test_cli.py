"""The command line on a machine without a GPU: help, list, and every user mistake gives one clear
message and a non-zero exit, never a traceback."""

import pytest
import torch

from cudabench.cli.app import COMMANDS
from typer.testing import CliRunner

from cudabench.cli.app import app

runner = CliRunner()


def invoke(*args):
    res = runner.invoke(app, list(args))
    assert "Traceback" not in res.output
    return res


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.mark.parametrize("command", [name for name, _ in COMMANDS])
def test_every_command_has_help(command):
    res = invoke(command, "--help")
    assert res.exit_code == 0 and "Usage" in res.output and "Examples:" in res.output


def test_list_shows_variants_constraints_and_baselines():
    res = invoke("list")
    assert res.exit_code == 0
    for text in ["add2", "matmul-naive", "matmul-tiled", "timex-v1", "timex-v4", "T % 4 == 0", "B % 8 == 0",
                 "conv1d", "torch-matmul"]:
        assert text in res.output


def test_run_without_gpu_says_what_still_works(no_gpu):
    res = invoke("run", "--kernel", "timex-v4")
    assert res.exit_code == 2
    assert "No CUDA device" in res.output and "build --check" in res.output


@pytest.mark.parametrize("args, fragment", [
    (["run", "--kernel", "timx-v4"], "Did you mean: timex-v4"),
    (["run", "--kernel", "timex-fft,timx-v4"], "Did you mean: timex-v4"),  # a list: each name is looked up
    (["check", "--kernel", "add2,timex-v3", "--shape", "T=766"], "T must be a multiple of 4"),
    (["run", "--kernel", "timex-v3", "--shape", "T=766"], "T must be a multiple of 4"),
    (["run", "--kernel", "timex-v4", "--shape", "B=12"], "B must be a multiple of 8"),
    (["run", "--kernel", "timex-v4", "--shape", "T=oops"], "not a whole number"),
    (["run", "--kernel", "add2", "--direction", "bwd"], "has no backward"),
    (["run", "--kernel", "add2", "--direction", "sideways"], "Unknown --direction"),
    (["run", "--kernel", "add2", "--timing", "sundial"], "--timing: expected one of sync, events"),
    (["run", "--kernel", "add2", "--repeat", "5", "--min-time", "1"], "alternatives"),
    (["run", "--kernel", "add2", "--warmup", "lots"], "--warmup"),
    (["run", "--kernel", "add2", "--baseline", "numpy"], "no baseline 'numpy'"),
    (["compare-sync-modes", "--kernel", "timex"], "not the family"),
    (["profile", "--kernel", "timex-v4", "--tool", "vtune"], "Unknown --tool"),
    (["profile", "--kernel", "attn-flash3", "--dtype", "float32"], "attn-flash3 takes bfloat16, float16, not float32"),
    (["compare-sync-modes", "--kernel", "matmul-wgmma", "--shape", "M=100"], "M must be a multiple of 128"),
    (["build"], "--kernel NAME"),
    (["build", "--all", "--check"], "--arch"),
    (["run", "--kernel", "add2", "--warmup", "0"], "--warmup"),
    (["run", "--config", "configs/timex.toml", "--shape", "T=64"], "--shape goes with --kernel"),
    (["run", "--kernel", "add2", "--json", "/proc/cannot/x.json"], "Cannot"),
    (["check", "--kernel", "timex", "--direction", "sideways"], "Unknown --direction"),
    (["compare-sync-modes", "--show", "0"], "--show"),
    (["plot", "tests/fixtures/none.json"], "does not exist"),
])
def test_user_mistakes_get_one_message_and_exit_2(no_gpu, args, fragment):
    res = invoke(*args)
    assert res.exit_code == 2, res.output
    assert "error:" in res.output and fragment in res.output


def test_profile_without_nsys_says_where_it_looked(no_gpu, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUDABENCH_NSYS", raising=False)
    monkeypatch.setattr("cudabench.profile.nsys.INSTALL_GLOBS", ())
    res = invoke("profile", "--kernel", "timex-v4")
    assert res.exit_code == 2 and "nsys) was not found" in res.output and "--tool torch" in res.output


def test_a_single_variant_is_planned_in_the_first_precision_it_takes():
    from cudabench.engine.plan import plan_single
    from cudabench.spec.registry import discover

    registry = discover()
    assert plan_single(registry, "attn-flash3", {}, "fwdbwd").cases[0].dtype == "bfloat16"
    assert plan_single(registry, "attn-flash3", {}, "fwd", dtype="float16").cases[0].dtype == "float16"
    assert plan_single(registry, "timex-v4", {}, "fwd").cases[0].dtype == "float32"


def test_build_without_cuda_torch_points_to_check(no_gpu, monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", None)
    res = invoke("build", "--kernel", "add2", "--arch", "sm_90")
    assert res.exit_code == 2 and "build --check" in res.output


def test_python_dash_m_works():
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-m", "cudabench", "--help"], capture_output=True, text=True)
    assert res.returncode == 0 and "compare-sync-modes" in res.stdout


def test_piped_output_follows_COLUMNS_and_list_reads_at_80_columns():
    import subprocess
    import sys

    env = {**__import__("os").environ, "COLUMNS": "80"}
    res = subprocess.run([sys.executable, "-m", "cudabench", "list"], capture_output=True, text=True, env=env,
                         timeout=120)
    assert res.returncode == 0
    lines = res.stdout.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 80
    assert len(lines) < 150  # a summary column squeezed to a few characters made 280
    assert any(line.startswith("  timex-v4  ") or line.startswith("  timex-v4 ") for line in lines)
    from cudabench.cli.common import piped_width

    assert piped_width({"COLUMNS": "100"}) == 100 and piped_width({}) == 130 and piped_width({"COLUMNS": "x"}) == 130


def test_text_from_users_and_tools_never_drives_the_terminal(tmp_path):
    folder = tmp_path / "k" / "esc"
    folder.mkdir(parents=True)
    (folder / "spec.py").write_text("raise RuntimeError('\\x1b[2J\\x1b]0;owned\\x07 cleared')\n")
    res = invoke("list", "--kernels-dir", str(tmp_path / "k"))
    assert res.exit_code == 2 and "\x1b" not in res.output and "\\x1b[2J" in res.output


def test_a_kernels_dir_that_is_a_family_folder_a_file_or_empty_is_explained(tmp_path):
    family = tmp_path / "mine" / "scale"
    family.mkdir(parents=True)
    (family / "spec.py").write_text("")
    res = invoke("list", "--kernels-dir", str(family))
    assert res.exit_code == 2 and "is a family's own folder" in res.output and str(tmp_path / "mine") in res.output
    (tmp_path / "empty").mkdir()
    res = invoke("list", "--kernels-dir", str(tmp_path / "empty"))
    assert res.exit_code == 2 and "holds no family" in res.output
    (tmp_path / "file").write_text("x")
    res = invoke("list", "--kernels-dir", str(tmp_path / "file"))
    assert res.exit_code == 2 and "is not a folder" in res.output


def test_build_takes_comma_separated_kernels_and_not_all_beside_them():
    res = invoke("build", "-k", "add2,sincos", "--check")  # the names resolve; then the missing --arch
    assert res.exit_code == 2 and "needs a target architecture" in res.output
    res = invoke("build", "--all", "-k", "add2", "--check", "--arch", "sm_90")
    assert res.exit_code == 2 and "not both" in res.output


def test_the_op_options_without_op_say_they_go_with_it():
    res = invoke("run", "--op-inputs", "a:b")
    assert res.exit_code == 2 and "go with --op" in res.output


def _single_valued_options():
    """(command, option) for every option of every command that takes one value."""
    import typer

    from cudabench.cli.once import single_valued

    group = typer.main.get_command(app)
    return [(name, max(option.opts, key=len)) for name, command in sorted(group.commands.items())
            for option in {id(o): o for o in single_valued(command).values()}.values()]


@pytest.mark.parametrize("command, option", _single_valued_options())
def test_an_option_that_takes_one_value_given_twice_is_refused(command, option):
    """click would keep the second value and drop the first without a word; the values need not be valid,
    the repeat is found before they are read."""
    res = invoke(command, option, "1", option, "2")
    assert res.exit_code == 2, res.output
    assert f"{option} takes one value and was given 2 times" in res.output


def test_a_repeat_is_found_in_every_spelling():
    for args in (["--timing=events", "--timing", "graph"], ["-s", "n=1", "--shape=n=2"]):
        res = invoke("profile" if "-s" in args else "run", "-k", "add2", *args)
        assert res.exit_code == 2 and "takes one value" in res.output, res.output


def test_a_repeat_inside_a_cluster_of_short_flags_is_found():
    """-vs X is -v -s X: a repeat hidden behind a short flag is still a repeat; the flag alone is no option."""
    import typer

    from cudabench.cli.once import OnceCommand

    tiny = typer.Typer()

    @tiny.command(cls=OnceCommand)
    def go(verbose: bool = typer.Option(False, "-v"), shape: str = typer.Option("", "-s"), kernel: str = "",
           dirs: list[str] = typer.Option([], "-d")) -> None:
        print(f"shape={shape} verbose={verbose}")

    for args in (["-vsn=1", "-s", "n=2"], ["-s", "n=1", "-vvs", "n=2"], ["-vs", "n=1", "-sn=2"]):
        res = runner.invoke(tiny, args)
        assert res.exit_code == 2 and "-s takes one value and was given 2 times" in res.output, (args, res.output)
    for args in (["-vsn=1"], ["-v", "-s", "-v"], ["--kernel", "-s", "-sn=2"], ["-d", "-vsa", "-s", "b"],
                 ["-d", "-s", "-d", "-s", "-sb"]):  # a value, of one option or of several, is not an option
        res = runner.invoke(tiny, args)
        assert res.exit_code == 0, (args, res.output)


def test_run_and_check_plan_every_shape_given(no_gpu):
    """The first of two shapes is planned too: the bad one first, so the last alone would pass planning."""
    for command in ("run", "check"):
        res = invoke(command, "--kernel", "timex-v3", "--shape", "T=766", "--shape", "T=768")
        assert res.exit_code == 2 and "T must be a multiple of 4" in res.output, res.output


def test_several_shapes_are_planned_in_order_and_a_repeat_once():
    from cudabench.engine.plan import RunOptions, plan_shapes
    from cudabench.spec.registry import discover
    from cudabench.spec.shapes import parse_shapes

    shapes = parse_shapes(["n=1024", "n=2^12", "n=1_024"])
    assert shapes == [{"n": 1024}, {"n": 4096}] and parse_shapes(None) == [{}]
    tasks = plan_shapes(discover(), ["add2"], shapes, RunOptions())
    assert [task.cases[0].params["n"] for task in tasks] == [1024, 4096]


def test_a_family_the_shapes_leave_at_its_defaults_is_planned_once_and_fuzzed_once():
    from cudabench.cli.runner import fuzz_tasks
    from cudabench.engine.plan import RunOptions, plan_shapes
    from cudabench.spec.registry import discover

    registry, options = discover(), RunOptions()
    tasks = plan_shapes(registry, ["add2", "timex-v4"], [{"n": 1024}, {"n": 2048}], options)
    assert [(t.family.name, t.cases[0].params.get("n")) for t in tasks] == [("add2", 1024), ("timex", None),
                                                                          ("add2", 2048)]
    one = plan_shapes(registry, ["add2"], [{"n": 1024}], options)
    variants = len(one[0].variants)  # add2 names the family: all its variants
    assert len(fuzz_tasks(registry, tasks[::2], 3, options, 7)) == len(fuzz_tasks(registry, one, 3, options, 7))
    assert len(fuzz_tasks(registry, one, 3, options, 7)) == 3 * variants


def test_help_is_shown_even_beside_a_repeat():
    res = invoke("run", "--timing", "events", "--timing", "graph", "--help")
    assert res.exit_code == 0 and "Usage" in res.output
