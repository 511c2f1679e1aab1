"""Tool discovery shared by build, profile and doctor: the order, the "found via" text, explicit
paths that do not work, and the CUDA toolkit behind an nvcc wrapper script."""

import os
import shutil
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cudabench.cli import doctor
from cudabench.cli.app import app
from cudabench.errors import ToolNotFoundError
from cudabench import tools
from cudabench.profile import ncu, nsys


def script(path: Path, body: str = "echo 'tool 1.0'") -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_explicit_then_env_then_path_then_install_folders(tmp_path):
    explicit = script(tmp_path / "a" / "ncu")
    from_env = script(tmp_path / "b" / "ncu")
    on_path = script(tmp_path / "c" / "ncu")
    installed = script(tmp_path / "opt" / "2025.1" / "ncu")
    globs = [str(tmp_path / "opt" / "*" / "ncu")]
    env = {"CUDABENCH_NCU": from_env, "PATH": str(tmp_path / "c")}

    def find(explicit_path, env):
        return tools.locate("ncu", globs, explicit_path, "--ncu", "CUDABENCH_NCU", env)

    assert find(explicit, env) == tools.Found(explicit, "--ncu")
    assert find(None, env) == tools.Found(from_env, "$CUDABENCH_NCU")
    assert find(None, {"PATH": str(tmp_path / "c")}) == tools.Found(on_path, "PATH")
    found = find(None, {"PATH": str(tmp_path / "empty")})
    assert found == tools.Found(installed, str(tmp_path / "opt" / "*"))
    assert found.describe() == f"{installed} (found via {tmp_path / 'opt' / '*'})"


def test_the_newest_install_wins_by_version_not_by_spelling(tmp_path, monkeypatch):
    for version in ("2025.9.1", "2025.10.0", "2024.12.3"):
        script(tmp_path / version / "bin" / "nsys")
    monkeypatch.setattr(nsys, "INSTALL_GLOBS", (str(tmp_path / "*" / "bin" / "nsys"),))
    assert nsys.find_nsys(None, {"PATH": str(tmp_path / "empty")}).path == str(tmp_path / "2025.10.0" / "bin" / "nsys")


def test_ncu_comes_from_its_env_variable_or_path(tmp_path, monkeypatch):
    monkeypatch.setattr(ncu, "INSTALL_GLOBS", ())
    mine = script(tmp_path / "mine" / "ncu")
    on_path = script(tmp_path / "bin" / "ncu")
    assert ncu.find_ncu({"CUDABENCH_NCU": mine, "PATH": str(tmp_path / "bin")}) == tools.Found(mine, "$CUDABENCH_NCU")
    assert ncu.find_ncu({"PATH": str(tmp_path / "bin")}) == tools.Found(on_path, "PATH")


def test_nvcc_from_cuda_home_says_so(tmp_path):
    nvcc = script(tmp_path / "cuda-12.4" / "bin" / "nvcc")
    found = tools.find_nvcc({"PATH": str(tmp_path / "empty"), "CUDA_HOME": str(tmp_path / "cuda-12.4")})
    assert found == tools.Found(nvcc, "$CUDA_HOME/bin")


@pytest.mark.parametrize("how", ["--nsys", "$CUDABENCH_NSYS"])
def test_an_explicit_path_that_does_not_work_is_an_error_not_a_fallback(tmp_path, how):
    script(tmp_path / "bin" / "nsys")  # a working nsys on PATH must not be used instead
    not_executable = tmp_path / "nsys.txt"
    not_executable.write_text("")
    for bad in (str(tmp_path / "missing" / "nsys"), str(not_executable), str(tmp_path)):
        env = {"PATH": str(tmp_path / "bin")}
        if how == "--nsys":
            call = lambda: nsys.find_nsys(bad, env)  # noqa: E731
        else:
            env["CUDABENCH_NSYS"] = bad
            call = lambda: nsys.find_nsys(None, env)  # noqa: E731
        with pytest.raises(ToolNotFoundError) as info:
            call()
        assert info.value.message == f"{how} names {bad}, which is not an executable file."
        assert info.value.exit_code == 2


def test_a_bare_name_is_looked_up_on_path(tmp_path):
    on_path = script(tmp_path / "bin" / "nsys-2025")
    assert nsys.find_nsys("nsys-2025", {"PATH": str(tmp_path / "bin")}) == tools.Found(on_path, "--nsys")


def test_not_found_says_every_place_it_looked(tmp_path, monkeypatch):
    monkeypatch.setattr(nsys, "INSTALL_GLOBS", ("/nowhere/nsys", "/opt/nowhere/*/bin/nsys"))
    with pytest.raises(ToolNotFoundError) as info:
        nsys.find_nsys(None, {"PATH": str(tmp_path)})
    assert "Looked at --nsys, $CUDABENCH_NSYS, PATH, /nowhere, /opt/nowhere/*/bin." in info.value.message


# ---- the CUDA toolkit behind nvcc -------------------------------------------------------------------

def test_cuda_home_is_what_the_nvcc_wrapper_reports(tmp_path):
    wrapper = script(tmp_path / "bin" / "nvcc", "echo '#$ TOP=/opt/cuda-12.4/bin/..' >&2")
    assert tools.cuda_home_of(wrapper) == "/opt/cuda-12.4"


def test_cuda_home_falls_back_to_the_folder_above_the_resolved_nvcc(tmp_path):
    real = script(tmp_path / "cuda-12.4" / "bin" / "nvcc", "exit 1")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "nvcc").symlink_to(real)
    assert tools.cuda_home_of(str(tmp_path / "bin" / "nvcc")) == os.path.realpath(tmp_path / "cuda-12.4")


@pytest.mark.skipif(not shutil.which("nvcc"), reason="needs nvcc")
def test_cuda_home_through_a_wrapper_of_the_real_nvcc(tmp_path):
    wrapper = script(tmp_path / "bin" / "nvcc", f'exec {shutil.which("nvcc")} "$@"')
    home = Path(tools.cuda_home_of(wrapper))
    # torch's guess (the folder above the wrapper) has no CUDA headers; this one does
    assert (home / "include" / "cuda_runtime.h").is_file()
    assert not (tmp_path / "include").exists() and home != tmp_path
    assert (home / "bin" / "nvcc").is_file()
    linked = tmp_path / "link" / "nvcc"
    linked.parent.mkdir()
    linked.symlink_to(home / "bin" / "nvcc")
    assert tools.cuda_home_of(str(linked)) == str(home)


# ---- doctor ------------------------------------------------------------------------------------------

@pytest.fixture
def fake_toolbox(tmp_path, monkeypatch):
    """A PATH holding only fake tools: nvcc is a wrapper whose toolkit is elsewhere."""
    bin_dir = tmp_path / "bin"
    script(bin_dir / "nvcc", 'case "$1" in --dryrun) echo "#$ TOP=/opt/cuda-12.4/bin/.." >&2;; '
                             '*) echo "Cuda compilation tools, release 12.4";; esac')
    script(bin_dir / "ninja", "echo 1.11.1")
    script(bin_dir / "ncu", "echo 'NVIDIA (R) Nsight Compute Command Line Profiler 2025.1'")
    nsys_path = script(tmp_path / "nsight" / "nsys", "echo 'NVIDIA Nsight Systems version 2023.4.4.54-32845696v0'")
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("CUDABENCH_NSYS", nsys_path)
    for name in ("CUDABENCH_NCU", "CUDABENCH_NVCC", "CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(tools, "torch_cuda_home", lambda: str(tmp_path))
    return tmp_path


def doctor_output() -> str:
    res = CliRunner().invoke(app, ["doctor"])
    assert res.exit_code == 0, res.output
    return " ".join(res.output.replace("│", " ").split())  # one line per row, wrapped cells rejoined


def test_doctor_says_where_each_tool_came_from(fake_toolbox):
    text = doctor_output()
    bin_dir = fake_toolbox / "bin"
    assert f"{bin_dir / 'nvcc'} (found via PATH)" in text and "release 12.4" in text
    assert f"{bin_dir / 'ninja'} (found via PATH)" in text
    assert f"{bin_dir / 'ncu'} (found via PATH)" in text
    assert f"{fake_toolbox / 'nsight' / 'nsys'} (found via $CUDABENCH_NSYS)" in text
    # the CUDA_HOME torch would guess and the toolkit nvcc runs, both named
    assert "differs" in text and str(fake_toolbox) in text and "/opt/cuda-12.4" in text


def test_doctor_reports_matplotlib_and_nvtx(fake_toolbox, monkeypatch):
    monkeypatch.setattr(doctor, "package_version", lambda name: {"nvtx": "0.2.13"}.get(name))
    text = doctor_output()
    assert 'matplotlib missing not installed (needed for cudabench plot): pip install "cudabench[plot]"' in text
    # this (fake) nsys 2023.4 does not record ranges of nvtx 0.2.13: doctor says profile falls back
    assert "nvtx ok 0.2.13; profile --tool nsys marks ranges with torch.cuda.nvtx" in text


def test_doctor_shows_a_broken_explicit_path(fake_toolbox, monkeypatch):
    monkeypatch.setenv("CUDABENCH_NCU", str(fake_toolbox / "nope"))
    text = doctor_output()
    assert f"ncu missing $CUDABENCH_NCU names {fake_toolbox / 'nope'}, which is not an executable file." in text


def test_doctor_says_an_nsys_without_importer_writes_no_report(fake_toolbox):
    text = doctor_output()
    assert "nsys limited" in text and "no QdstrmImporter beside it" in text
    importer = fake_toolbox / "host-linux-x64" / "QdstrmImporter"
    importer.parent.mkdir()
    importer.write_text("")
    assert "QdstrmImporter" not in doctor_output()


def test_nvcc_that_is_not_nvcc_is_named_by_doctor_and_build(monkeypatch):
    from cudabench.cli.doctor import tool_finding
    from cudabench.errors import ToolNotFoundError
    from cudabench import tools
    from cudabench.spec.compile_check import find_nvcc

    monkeypatch.setenv("CUDABENCH_NVCC", "/bin/false")
    finding = tool_finding("nvcc", "build", tools.find_nvcc)
    assert not finding.ok and "/bin/false is not nvcc: asked for its version, it exited with code 1" in finding.detail
    with pytest.raises(ToolNotFoundError, match="/bin/false is not nvcc"):
        find_nvcc()


def test_a_failed_compile_never_shows_without_a_reason(tmp_path):
    from cudabench.spec.compile_check import _run

    check = _run(["/bin/false", "x.cu"], tmp_path / "x.cu")
    assert not check.ok and check.output == "/bin/false exited with code 1 and printed nothing"
