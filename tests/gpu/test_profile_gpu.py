"""`cudabench profile` end to end on the GPU with each tool (skipped where the tool is missing)."""

import glob
import json
import os
import shutil
import subprocess
import sys

import pytest

from cudabench.profile import nsys_report

pytestmark = pytest.mark.gpu

SMALL = ["--kernel", "timex-v4", "--shape", "B=8,C=64,T=256"]


def profile(tmp_path, *args, shape=SMALL):
    cmd = [sys.executable, "-m", "cudabench", "profile", *shape, "-o", str(tmp_path), *args]
    # an 80-column log: the tables still show every name whole
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env={**os.environ, "COLUMNS": "80"})


def real_nsys():
    path = os.environ.get("CUDABENCH_NSYS") or shutil.which("nsys")
    return path if path and "nsight-compute" not in path else None


@pytest.mark.skipif(real_nsys() is None, reason="needs a full Nsight Systems on PATH or $CUDABENCH_NSYS")
def test_nsys_profile_writes_report_and_tables_agreeing_with_events(tmp_path):
    # the seed shape: at ~10 µs kernels the event timer's own overhead would dominate the comparison
    res = profile(tmp_path, "--tool", "nsys", "--iters", "10", shape=["--kernel", "timex-v4"])
    assert res.returncode == 0, res.stdout + res.stderr
    assert "kernels (timex-v4" in res.stdout and "fwd_vec<8" in res.stdout
    assert "NVTX ranges" in res.stdout and "timed timex-v4" in res.stdout
    base = tmp_path / "timex-v4-fwd-nsys"
    assert base.with_suffix(".nsys-rep").is_file()
    data = nsys_report.read_report(base.with_suffix(".sqlite"))
    assert len([k for k in data.kernels if k.name.startswith("fwd_vec<8")]) == 10
    calls = [r for r in nsys_report.range_table(data) if r.name == "timex-v4 call"]
    assert calls and calls[0].count == 10
    events = json.loads(base.with_suffix(".worker.json").read_text())["events_median"]
    assert abs(calls[0].gpu_median / events - 1) < 0.05


def nsight_compute_nsys():
    found = sorted(glob.glob("/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys"))
    return found[-1] if found else None


@pytest.mark.skipif(nsight_compute_nsys() is None, reason="no nsys copy inside Nsight Compute here")
def test_nsys_without_importer_is_explained_and_qdstrm_kept(tmp_path):
    res = profile(tmp_path, "--tool", "nsys", "--nsys", nsight_compute_nsys(), "--iters", "3")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "could not turn it into a report" in res.stderr and "--tool torch" in res.stderr
    assert "Traceback" not in res.stderr
    assert list(tmp_path.glob("*.qdstrm"))


@pytest.mark.skipif(shutil.which("ncu") is None and not os.path.exists("/usr/local/cuda/bin/ncu"),
                    reason="needs ncu")
def test_ncu_profile_prints_metrics(tmp_path):
    res = profile(tmp_path, "--tool", "ncu")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Nsight Compute" in res.stdout and "fwd_vec" in res.stdout and "occupancy" in res.stdout


def test_torch_profile_prints_kernels_and_writes_trace(tmp_path):
    res = profile(tmp_path, "--tool", "torch", "--iters", "5")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "fwd_vec<8" in res.stdout
    trace = tmp_path / "timex-v4-fwd-torch.trace.json"
    assert trace.is_file() and "traceEvents" in trace.read_text()[:2000]
