"""The profile command lines (pure functions), tool discovery and the no-importer explanation."""

import json
import stat
from pathlib import Path

import pytest
import torch
from rich.console import Console
from typer.testing import CliRunner

from cudabench.cli.app import app
from cudabench.profile import nsys
from cudabench.profile.view import find_profiler
from cudabench.engine.protocol import Profile, read_request
from cudabench.errors import ToolNotFoundError
from cudabench.results.records.model import Case
from cudabench.profile.ncu import METRICS, import_command, parse_raw_csv
from cudabench.profile.launch import ProfileRequest, child_command, worker_command


SEED_CASE = Case("timex", (("B", 32), ("C", 768), ("T", 768)))


def request(**kw):
    return ProfileRequest(kernel="timex-v4", out_dir=Path("/out"), seed=5, python="py", **{"case": SEED_CASE, **kw})


def test_worker_command_is_the_run_worker_answering_one_profile_request():
    case = Case("timex", (("B", 8), ("C", 64), ("T", 256)), "fwdbwd")
    cmd = worker_command(request(shape="B=8,C=64,T=256", direction="fwdbwd", iterations=7, case=case))
    assert cmd[:4] == ["py", "-m", "cudabench.engine.worker", "--request"]
    sent = read_request(json.loads(cmd[4]))  # what the worker reads back
    assert isinstance(sent, Profile) and sent.hello.nvtx and sent.subject == "timex-v4" and sent.family == "timex"
    assert sent.case == case and sent.iterations == 7 and sent.seed == 5 and sent.tool == "nsys"


def test_nsys_child_traces_cuda_and_nvtx_in_the_capture_range_only():
    cmd = child_command(request(name="mine"), "/opt/nsys")
    assert cmd[:2] == ["/opt/nsys", "profile"]
    for flag in ["--trace=cuda,nvtx", "--sample=none", "--cpuctxsw=none", "--capture-range=cudaProfilerApi",
                 "--capture-range-end=stop", "--output=/out/mine"]:
        assert flag in cmd
    assert cmd.index("--output=/out/mine") < cmd.index("py")  # tool options before the program
    assert json.loads(cmd[-1])["iterations"] == 20  # nsys default iterations


def test_ncu_child_leaves_clocks_alone_and_waits_for_profiler_start():
    cmd = child_command(request(tool="ncu"), "/cuda/ncu")
    assert cmd[:5] == ["/cuda/ncu", "--clock-control", "none", "--profile-from-start", "no"]
    assert ",".join(METRICS) in cmd and "/out/timex-v4-fwd-ncu.ncu-rep" in cmd
    assert json.loads(cmd[-1])["iterations"] == 1
    assert import_command("/cuda/ncu", Path("r.ncu-rep"))[:3] == ["/cuda/ncu", "--import", "r.ncu-rep"]


def test_torch_child_is_the_worker_with_a_trace_path():
    cmd = child_command(request(tool="torch"), None)
    assert cmd[0] == "py" and json.loads(cmd[-1])["trace"].endswith(".trace.json")


def executable(path: Path, says: str = "NVIDIA Nsight Systems version 2023.4.4.54-32845696v0") -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho '{says}'\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_discovery_order(tmp_path, monkeypatch):
    explicit = executable(tmp_path / "a" / "nsys")
    from_env = executable(tmp_path / "b" / "nsys")
    on_path = executable(tmp_path / "c" / "nsys")
    env = {"CUDABENCH_NSYS": from_env, "PATH": str(tmp_path / "c")}
    assert nsys.find_nsys(explicit, env) == nsys.Found(explicit, "--nsys")
    assert nsys.find_nsys(None, env) == nsys.Found(from_env, "$CUDABENCH_NSYS")
    assert nsys.find_nsys(None, {"PATH": str(tmp_path / "c")}) == nsys.Found(on_path, "PATH")
    installed = executable(tmp_path / "opt" / "2025.1" / "bin" / "nsys")
    monkeypatch.setattr(nsys, "INSTALL_GLOBS", (str(tmp_path / "opt" / "*" / "bin" / "nsys"),))
    folder = str(tmp_path / "opt" / "*" / "bin")  # "found via" names the install folder it matched
    assert nsys.find_nsys(None, {"PATH": str(tmp_path / "none")}) == nsys.Found(installed, folder)
    assert nsys.nsys_version(on_path) == (2023, 4, 4)


def test_a_bad_explicit_path_and_no_nsys_are_clear(tmp_path, monkeypatch):
    with pytest.raises(ToolNotFoundError, match="not an executable"):
        nsys.find_nsys(str(tmp_path / "missing"), {"PATH": str(tmp_path)})
    monkeypatch.setattr(nsys, "INSTALL_GLOBS", ())
    with pytest.raises(ToolNotFoundError) as info:
        nsys.find_nsys(None, {"PATH": str(tmp_path)})
    assert "--tool torch" in info.value.hint


def test_importer_detection(tmp_path):
    good = executable(tmp_path / "nsys" / "target-linux-x64" / "nsys")
    (tmp_path / "nsys" / "host-linux-x64").mkdir()
    (tmp_path / "nsys" / "host-linux-x64" / "QdstrmImporter").write_text("")
    bad = executable(tmp_path / "ncu" / "host" / "target-linux-x64" / "nsys")
    assert nsys.importer_present(good) and not nsys.importer_present(bad)


def test_only_a_qdstrm_is_explained_and_kept(tmp_path):
    base = tmp_path / "run"
    base.with_suffix(".qdstrm").write_bytes(b"x" * 2048)
    with pytest.raises(nsys.NsysImporterMissing) as info:
        nsys.check_report(base, "/opt/ncu/nsys", "Unable to retrieve the importer version\n")
    assert info.value.exit_code == 2
    assert "could not turn it into a report" in info.value.message and "importer version" in info.value.message
    assert "--tool torch" in info.value.hint and base.with_suffix(".qdstrm").exists()
    base.with_suffix(".nsys-rep").write_bytes(b"rep")
    assert nsys.check_report(base, "nsys", "") == base.with_suffix(".nsys-rep")


@pytest.mark.parametrize("version, package, backend, why", [
    ((2023, 4, 4), "0.2.11", "nvtx", ""), ((2023, 4, 4), "0.2.13", "torch", "predates 2024"),
    ((2025, 1, 0), "0.2.16", "nvtx", ""), ((2023, 4, 4), None, "torch", "not installed"), (None, "0.2.16", "nvtx", ""),
])
def test_nvtx_backend_follows_what_nsys_can_record(version, package, backend, why):
    chosen, reason = nsys.nvtx_backend_for(version, package)
    assert chosen == backend and why in reason


def test_ncu_raw_csv():
    text = (
        '"ID","Process ID","Kernel Name","gpu__time_duration.sum","launch__registers_per_thread",'
        '"sm__throughput.avg.pct_of_peak_sustained_elapsed"\n'
        '"","","","us","register/thread","%"\n'
        '"0","12","fwd_vec<8>","436.58","84","71.20"\n'
        '"1","12","sum_partials","1,204.00","32","5.00"\n'
    )
    rows = parse_raw_csv(text)
    assert [r.kernel for r in rows] == ["fwd_vec<8>", "sum_partials"]
    assert rows[0].seconds() == pytest.approx(436.58e-6) and rows[1].seconds() == pytest.approx(1204e-6)
    assert rows[0].values["launch__registers_per_thread"] == ("84", "register/thread")
    assert parse_raw_csv("==PROF== nothing profiled\n") == []


def test_real_ncu_csv_fixture():
    """Exported by `cudabench profile -k timex-v4 -d fwdbwd --tool ncu` on the H100 (tests/fixtures/README.md)."""
    text = (Path(__file__).parent / "fixtures" / "ncu-timex-v4-fwdbwd.csv").read_text()
    rows = parse_raw_csv(text)
    assert [r.kernel.split("(")[0] for r in rows] == ["void <unnamed>::fwd_vec<8>", "void <unnamed>::bwd_vec<2>",
                                                     "<unnamed>::sum_partials"]
    assert rows[0].seconds() == pytest.approx(433.088e-6)
    assert rows[0].cell("launch__registers_per_thread") == "84"
    assert rows[0].cell("launch__shared_mem_per_block_dynamic") == "27.7 KB"
    assert rows[0].cell("sm__throughput.avg.pct_of_peak_sustained_elapsed") == "68.2"


def test_report_names_keep_dots_in_the_name():
    assert nsys.report_paths(Path("/o/run.v2")) == (Path("/o/run.v2.nsys-rep"), Path("/o/run.v2.qdstrm"),
                                                    Path("/o/run.v2.sqlite"))
    assert "--output=/out/a.b" in child_command(request(name="a.b"), "/opt/nsys")


@pytest.mark.parametrize("tool", ["ncu", "torch"])
def test_nsys_option_with_another_tool_is_a_usage_error(tool, tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    nsys_path = executable(tmp_path / "nsys")
    res = CliRunner().invoke(app, ["profile", "-k", "timex-v4", "--tool", tool, "--nsys", nsys_path])
    assert res.exit_code == 2, res.output
    assert f"error: --nsys only applies to --tool nsys (this is --tool {tool})" in res.output


def test_profile_ncu_with_a_broken_cudabench_ncu_stops_before_the_gpu(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("CUDABENCH_NCU", str(tmp_path / "ncu"))
    res = CliRunner().invoke(app, ["profile", "-k", "timex-v4", "--tool", "ncu"])
    assert res.exit_code == 2 and f"$CUDABENCH_NCU names {tmp_path / 'ncu'}, which is not an executable" in res.output


def test_profile_says_which_binary_it_runs_and_why(tmp_path, monkeypatch):
    ncu = executable(tmp_path / "ncu", "NVIDIA (R) Nsight Compute Command Line Profiler")
    monkeypatch.setenv("CUDABENCH_NCU", ncu)
    out, err = Console(record=True, width=300), Console(record=True, width=300)
    assert find_profiler("ncu", None, out, err) == ncu
    assert f"ncu: {ncu} (found via $CUDABENCH_NCU)" in out.export_text()
    assert find_profiler("torch", None, out, err) is None


@pytest.mark.parametrize("tool", ["ncu", "torch"])
def test_profile_timeline_needs_nsys(tool, tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    res = CliRunner().invoke(app, ["profile", "-k", "add2", "--tool", tool, "--timeline", str(tmp_path / "t.png")])
    assert res.exit_code == 2, res.output
    assert f"--timeline reads an Nsight Systems report (this is --tool {tool})" in res.output


def test_profile_timeline_refuses_an_unknown_image_type_before_profiling(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    res = CliRunner().invoke(app, ["profile", "-k", "add2", "--timeline", str(tmp_path / "t.bmpx")])
    assert res.exit_code == 2 and "t.bmpx" in res.output, res.output


def test_a_binary_that_is_not_the_tool_is_named_as_such(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDABENCH_NCU", executable(tmp_path / "ncu"))  # answers as nsys
    with pytest.raises(ToolNotFoundError, match="is not ncu: asked for its version, it exited with code 0 and printed "
                                                "'NVIDIA Nsight Systems"):
        find_profiler("ncu", None, Console(), Console())
