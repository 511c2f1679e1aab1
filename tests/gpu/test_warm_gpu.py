"""Warm workers on the GPU: a hostile subject, then an honest one in a later invocation served by the
same warm worker, is caught and blamed alone; an edit between two invocations is what runs."""

import json
import shutil
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from cudabench.cli.app import app
from cudabench.engine.warm_client import socket_name, warm_workers

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = ROOT / "tests" / "hostile_kernels"


def run(tmp_path, *args):
    out = tmp_path / "r.json"
    res = CliRunner().invoke(app, ["run", "--warm", "--repeat", "20", "--no-baseline", "--json", str(out), *args])
    assert out.exists(), res.output
    return {r["subject"]: r for r in json.loads(out.read_text())["results"]}, res


def served():
    """The warm worker a plain run here reaches (others of this host's GPUs, busy in parallel, left out)."""
    return {info["pid"]: info["runs"] for path, info in warm_workers() if path.stem == socket_name(None)}


@pytest.mark.parametrize("attack, caught_by", [("hostile-patch-timer", "process-state"), ("hostile-thread", "threads"),
                                               ("hostile-memo", "fresh-inputs"),
                                               ("hostile-side-stream", "stream-order")])
def test_a_hostile_subject_then_an_honest_one_in_a_later_invocation_of_the_warm_worker(tmp_path, attack, caught_by):
    shape = ["--kernels-dir", str(HOSTILE), "--shape", "n=16777216"]
    bad, res = run(tmp_path, "-k", attack, *shape)
    before = served()
    assert bad[attack]["status"] == "INVALID", res.output
    assert caught_by in {c["name"] for c in bad[attack]["integrity"] if c["verdict"] == "fail"}
    good, res = run(tmp_path, "-k", "hostile-honest", *shape)
    honest = good["hostile-honest"]
    assert honest["status"] == "ok", res.output
    assert all(c["verdict"] != "fail" for c in honest["integrity"])
    after = served()
    assert set(before) & set(after) and all(after[p] == before[p] + 1 for p in set(before) & set(after))


def test_an_edit_between_two_invocations_is_what_the_warm_worker_runs(tmp_path):
    kernels = tmp_path / "kernels"
    shutil.copytree(ROOT / "examples" / "my_kernels", kernels, ignore=shutil.ignore_patterns("__pycache__"))
    first, res = run(tmp_path, "--kernels-dir", str(kernels), "-k", "scale")
    assert first["scale"]["status"] == "ok", res.output
    before = served()
    source = kernels / "scale" / "scale.cu"
    source.write_text(source.read_text().replace("fmaf(alpha, x[i], beta)", "fmaf(alpha, x[i], beta + 1.0f)"))
    edited, res = run(tmp_path, "--kernels-dir", str(kernels), "-k", "scale")
    assert edited["scale"]["status"] == "FAIL", res.output  # the edited kernel ran, and is wrong
    assert set(before) & set(served())  # in the same warm worker


def gpu_memory_of_other_processes() -> list[int]:
    """MiB each of the device's other compute processes holds (the warm judge, its subject process and
    its spare among them), on this test's GPU only."""
    import os
    import subprocess

    if shutil.which("nvidia-smi") is None:
        pytest.skip("no nvidia-smi to read per-process memory")
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,gpu_uuid,used_memory", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True).stdout
    here = f"GPU-{torch.cuda.get_device_properties(0).uuid}"
    rows = [[f.strip() for f in line.split(",")] for line in out.splitlines() if line.strip()]
    return [int(mib) for pid, uuid, mib in rows if int(pid) != os.getpid() and uuid == here]


def compute_pids() -> set[int]:
    """The processes holding a CUDA context on any GPU, as nvidia-smi lists them."""
    import subprocess

    if shutil.which("nvidia-smi") is None:
        pytest.skip("no nvidia-smi to list the processes with a CUDA context")
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True).stdout
    return {int(line) for line in out.split() if line.strip().isdigit()}


def children(pid: int) -> set[int]:
    return {int(c) for task in Path(f"/proc/{pid}/task").iterdir() for c in (task / "children").read_text().split()}


def test_the_spare_subject_process_makes_no_cuda_context_while_it_waits(tmp_path):
    """The warm worker's spare waits beside the next run's subjects on the same GPU: a CUDA context made
    then (and its first CUDA calls) would run beside timed calls. It gets one only as it takes over."""
    import time

    done, res = run(tmp_path, "-k", "add2", "--shape", "n=65536")
    assert done["add2"]["status"] == "ok", res.output
    [judge] = served()
    if judge not in compute_pids():
        pytest.skip("nvidia-smi lists processes of another PID namespace")
    deadline = time.monotonic() + 60
    while not (len(children(judge)) == 2 and children(judge) & compute_pids()):  # the new subject process greeted
        assert time.monotonic() < deadline, (children(judge), compute_pids())
        time.sleep(0.5)
    time.sleep(8)  # past a spare's imports (about 4 s on the H100 host), after which it used to make its context
    subjects = children(judge)
    assert len(subjects) == 2 and len(subjects & compute_pids()) == 1, (subjects, compute_pids())


def test_a_warm_worker_between_runs_holds_no_subject_peak(tmp_path):
    """attn-naive at N=8192 keeps 2 GiB score matrices: a warm process that kept its allocator's cache
    would sit on them, and a later subject beside it (another pool, a Dask worker) ran out of memory."""
    done, res = run(tmp_path, "-k", "attn-naive", "--shape", "B=1,H=8,N=8192,D=64,causal=1", "--direction", "fwd")
    assert done["attn-naive"]["status"] == "ok", res.output
    assert served()  # the workers are alive, warm
    held = gpu_memory_of_other_processes()
    assert max(held) < 2048, held  # one that kept the 2 GiB of scores holds more, its context besides


def test_a_later_run_keeps_the_baselines_it_may_and_measures_the_variant_again(tmp_path):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    base = ["run", "--warm", "-k", "add2", "--shape", "n=65536", "--repeat", "20"]
    assert CliRunner().invoke(app, [*base, "--json", str(first)]).exit_code == 0
    res = CliRunner().invoke(app, [*base, "--baselines-from", str(first), "--json", str(second)])
    assert res.exit_code == 0, res.output
    before = {r["subject"]: r for r in json.loads(first.read_text())["results"]}
    after = {r["subject"]: r for r in json.loads(second.read_text())["results"]}
    kept = [s for s, r in after.items() if dict(r["measurement"]["extra"]).get("kept") == 1.0]
    assert kept and all(after[s]["role"] == "baseline" for s in kept) and "kept 1 baseline" in res.output
    for s in kept:  # as it was measured, its time not counted again
        assert after[s]["measurement"]["samples"] == before[s]["measurement"]["samples"] and after[s]["phases"] == {}
    variants = [s for s, r in after.items() if r["role"] == "variant"]
    assert variants and all(after[s]["measurement"]["samples"] != before[s]["measurement"]["samples"]
                            and after[s]["status"] == "ok" for s in variants)
