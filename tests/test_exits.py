"""A kernel family's spec.py that ends the process, in any way, is an error naming the file: never a
silent exit 0 (a CI job would pass on a run that wrote nothing)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cudabench.cli.run_outputs import Outputs
from cudabench.cli.supervise import unfinished_message

EXITS = {
    "sys-exit-0": "import sys\nsys.exit(0)\n",
    "sys-exit-3": "import sys\nsys.exit(3)\n",
    "os-exit-0": "import os\nos._exit(0)\n",
    "native-exit-0": "import ctypes\nctypes.CDLL(None).exit(0)\n",
    "sigkill": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
}


def cudabench(*args, cwd=None):
    env = {k: v for k, v in os.environ.items() if k != "CUDABENCH_NO_SUPERVISOR"}
    return subprocess.run([sys.executable, "-m", "cudabench", *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd, env=env)


def family_dir(tmp_path: Path, body: str) -> Path:
    folder = tmp_path / "kernels" / "leaver"
    folder.mkdir(parents=True)
    (folder / "spec.py").write_text(body)
    return folder.parent


@pytest.mark.parametrize("name", list(EXITS))
def test_a_spec_that_ends_the_process_is_an_error_naming_it(tmp_path, name):
    kernels = family_dir(tmp_path, EXITS[name])
    res = cudabench("list", "--kernels-dir", str(kernels))
    assert res.returncode != 0, (res.stdout, res.stderr)
    assert f"{kernels / 'leaver' / 'spec.py'}" in res.stderr and "Traceback" not in res.stderr + res.stdout
    if name.startswith(("sys", "os")):  # caught in the process: the line is known
        assert "spec.py:2 ended the process while loading" in res.stderr


@pytest.mark.parametrize("command", [["run", "-k", "leaver", "--json", "r.json"], ["build", "--all", "--check"]])
def test_run_and_build_do_not_pass_when_a_spec_exits(tmp_path, command):
    kernels = family_dir(tmp_path, EXITS["native-exit-0"])
    res = cudabench(*command, "--kernels-dir", str(kernels), cwd=tmp_path)
    assert res.returncode != 0 and "while loading" in res.stderr and "spec.py" in res.stderr
    assert not (tmp_path / "r.json").exists()


def test_the_message_for_an_unfinished_command():
    text = unfinished_message(["loading /k/a/spec.py", "loaded /k/a/spec.py", "loading /k/b/spec.py"], 0)
    assert "exited with code 0" in text and "while loading /k/b/spec.py" in text
    assert "while loading" not in unfinished_message(["loading /k/a/spec.py", "loaded /k/a/spec.py"], -9)


def test_a_run_that_wrote_no_results_file_says_so(tmp_path):
    outputs = Outputs(json=tmp_path / "r.json", csv=None, markdown=Path("-"))
    assert outputs.missing() == [tmp_path / "r.json"]
    (tmp_path / "r.json").write_text("{}")
    assert outputs.missing() == []


@pytest.mark.parametrize("args, says", [(["run", "-k", "add2", "--repeat", "1e3"], "Invalid value for '--repeat'"),
                                        (["run", "-k", "add2", "--x[red]y"], "No such option: --x[red]y"),
                                        (["run", "-k", "add2", "--bogus"], "No such option: --bogus"),
                                        (["compare"], "Missing argument"), (["nosuchcmd"], "No such command")])
def test_a_usage_error_the_parser_finds_is_one_paragraph_and_exit_2(tmp_path, args, says):
    """Values of the wrong type, unknown options and missing arguments, found before any command runs,
    read like every other mistake: `error: ...` and a hint, not the parser's usage block."""
    res = cudabench(*args, cwd=tmp_path)
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert res.stderr.startswith("error: ") and says in res.stderr and "--help` shows its usage" in res.stderr
    assert "Traceback" not in res.stderr and "Usage:" not in res.stderr
