"""End to end on the GPU: the runner and the CLI produce checked, timed results."""

import json

import pytest
from typer.testing import CliRunner

from cudabench.cli.app import app
from cudabench.measure.loop import Warmup
from cudabench.measure.stop import FixedCount
from cudabench.engine.plan import RunOptions, plan
from runs import run_in_workers

pytestmark = pytest.mark.gpu


def test_runner_times_variant_and_baseline(registry):
    options = RunOptions(rule=FixedCount(7), warmup=Warmup(calls=2, seconds=0))
    tasks = plan(registry, ["timex-v4"], {"B": 8, "C": 16, "T": 128}, options)
    results = run_in_workers(options, tasks)
    assert {(r.subject, r.case.direction) for r in results} == {
        ("timex-v4", "fwd"), ("conv1d", "fwd"), ("timex-v4", "fwdbwd"), ("conv1d", "fwdbwd")}
    for r in results:
        assert r.status == "ok", r.skipped
        assert r.check.passed and r.stats.n == 7 and r.stats.median > 0


def test_family_name_skips_variants_that_cannot_run(registry):
    options = RunOptions(rule=FixedCount(3), warmup=Warmup(calls=1, seconds=0), directions=("fwd",),
                         baselines=())
    tasks = plan(registry, ["timex"], {"B": 4, "C": 4, "T": 66}, options)
    results = run_in_workers(options, tasks)
    status = {r.subject: r.status for r in results}
    assert status == {"timex-v1": "ok", "timex-v2": "ok", "timex-v3": "SKIP", "timex-v4": "SKIP",
                      "timex-v5": "SKIP", "timex-fft": "ok", "timex-mma": "SKIP",
                      "timex-wgmma": "SKIP"}  # mma, wgmma: no float32


def test_cli_run_writes_json_with_samples(tmp_path):
    path = tmp_path / "r.json"
    res = CliRunner().invoke(app, ["run", "--kernel", "add2", "--shape", "n=2^16", "--repeat", "9",
                                   "--json", str(path)])
    assert res.exit_code == 0, res.output
    doc = json.loads(path.read_text())
    assert doc["schema_version"] == 2 and doc["environment"]["gpu"]
    subjects = {r["subject"]: r for r in doc["results"]}
    assert set(subjects) == {"add2", "add2-vec4", "add2-tile", "torch-add"}
    assert len(subjects["add2"]["measurement"]["samples"]) == 9
    assert subjects["add2"]["check"]["passed"]


def test_cli_events_timing(tmp_path):
    res = CliRunner().invoke(app, ["run", "--kernel", "matmul-tiled", "--shape", "M=128,N=128,K=128",
                                   "--timing", "events", "--repeat", "5"])
    assert res.exit_code == 0, res.output
    assert "matmul-tiled" in res.output and "torch-matmul" in res.output


def test_out_of_tree_example_builds_checks_and_times():
    res = CliRunner().invoke(app, ["run", "--kernels-dir", "examples/my_kernels", "--kernel", "scale",
                                   "--repeat", "5"])
    assert res.exit_code == 0, res.output
    assert "scale" in res.output and "torch-scale" in res.output


@pytest.mark.parametrize("family, shape, baselines", [
    ("timex", "B=8,C=64,T=256", "conv1d,fft"), ("add2", "n=1048576", "all"),
    ("matmul", "M=256,N=256,K=256", "all"), ("sincos", "n=1048576", "eager"),
    ("attention", "B=1,H=2,N=128,D=64,causal=1", "eager,sdpa-flash,sdpa-efficient,sdpa-math")])  # (torch.compile baselines left out: minutes of Inductor per precision)
def test_lower_precisions_check_and_time_the_baselines_and_skip_float32_kernels(tmp_path, registry, family, shape,
                                                                                baselines):
    import torch

    path = tmp_path / "r.json"
    res = CliRunner().invoke(app, ["run", "-k", family, "--shape", shape, "--dtype", "bfloat16,float16",
                                   "--baseline", baselines, "--repeat", "5", "--json", str(path)])
    assert res.exit_code == 0, res.output
    assert f"{family}  {shape}  bfloat16" in res.output and f"{family}  {shape}  float16" in res.output
    results = json.loads(path.read_text())["results"]
    assert {r["case"]["dtype"] for r in results} == {"bfloat16", "float16"}
    variants = {v.name: v for v in registry.family(family).variants}
    for r in results:
        takes = r["role"] == "baseline" or r["case"]["dtype"] in variants[r["subject"]].dtypes
        if not takes:  # a float32 kernel (or matmul-wgmma in float16): skipped with the reason
            assert r["status"] == "SKIP" and r["skipped"].startswith("dtype:"), r
        elif r["status"] == "SKIP":  # a Hopper rung on another GPU
            assert "sm_90a" in r["skipped"] and torch.cuda.get_device_capability() != (9, 0), r
        else:  # PyTorch's own ops and the low-precision kernels, in the same precision, within tolerance and trusted
            assert r["status"] == "ok", (r["subject"], r["case"]["key"], r.get("skipped"), r.get("integrity"))
            assert 0 < r["check"]["errors"]["out"] <= r["check"]["tolerance"]


def test_peak_memory_is_recorded_and_sane(tmp_path):
    """Each measured subject records what one call allocated: at least its output, more for the FFT
    convolution (its spectra) than for timex-fft (output only), and more with the backward
    (gradients, saved tensors) than without; shown in the table and the CSV."""
    path = tmp_path / "r.json"
    res = CliRunner().invoke(app, ["run", "-k", "timex-fft", "-k", "timex-v4", "--shape", "B=8,C=64,T=512", "-d", "fwd",
                                   "-d", "fwdbwd", "-b", "fft", "--repeat", "5", "--json", str(path),
                                   "--csv", str(tmp_path / "r.csv"), "--wide"])
    assert res.exit_code == 0, res.output
    assert "MiB" in res.output  # the peak memory column of the wide table
    peak = {(r["subject"], r["case"]["direction"]): r["peak_memory"] for r in json.loads(path.read_text())["results"]}
    output_bytes = 8 * 64 * 512 * 4
    assert all(bytes_ >= output_bytes for bytes_ in peak.values()), peak
    assert peak[("fft", "fwd")] > 2 * peak[("timex-fft", "fwd")], peak
    for subject in ("timex-fft", "timex-v4", "fft"):
        assert peak[(subject, "fwdbwd")] > peak[(subject, "fwd")], peak
    assert "peak_memory" in (tmp_path / "r.csv").read_text().splitlines()[0]


def test_attention_memory_grows_as_n_squared_for_naive_and_as_n_for_flash(tmp_path):
    """attn-naive keeps the score matrix (B·H·N² floats, twice with the backward's dP); the flash
    rungs keep out and one log-sum-exp per row. Forward and forward+backward, N = 1024 and 4096."""
    suite = tmp_path / "s.toml"
    suite.write_text('[timing]\nrepeat = 3\n[[case]]\nkernels = ["attn-naive", "attn-flash1"]\n'
                     'shape = { B = 1, H = 4, N = [1024, 4096], D = 64, causal = 1 }\n'
                     'directions = ["fwd", "fwdbwd"]\nbaselines = []\n')
    path = tmp_path / "r.json"
    res = CliRunner().invoke(app, ["run", "--config", str(suite), "--json", str(path)])
    assert res.exit_code == 0, res.output
    peak = {(r["subject"], r["case"]["shape"]["N"], r["case"]["direction"]): r["peak_memory"]
            for r in json.loads(path.read_text())["results"]}
    tensor = 4 * 4096 * 64 * 4  # one of q, k, v, out at N = 4096 (B·H = 4, D = 64, float32)
    for n in (1024, 4096):
        scores = 4 * n * n * 4
        assert peak[("attn-naive", n, "fwd")] >= scores, peak           # P
        assert peak[("attn-naive", n, "fwdbwd")] >= 2 * scores, peak    # P and dP
        for direction in ("fwd", "fwdbwd"):
            assert peak[("attn-naive", n, direction)] > peak[("attn-flash1", n, direction)] > 0, peak
    # at N = 4096 the score matrix is 16 tensors' worth: flash1 keeps out, lse (and dq, dk, dv, delta)
    assert peak[("attn-flash1", 4096, "fwd")] < 2 * tensor < peak[("attn-naive", 4096, "fwd")] / 8, peak
    assert peak[("attn-flash1", 4096, "fwdbwd")] < 6 * tensor, peak
    for subject, growth in (("attn-naive", (12, 17)), ("attn-flash1", (3, 5))):  # N²: 16x (less its N-sized part); N: 4x
        low, high = growth
        for direction in ("fwd", "fwdbwd"):
            ratio = peak[(subject, 4096, direction)] / peak[(subject, 1024, direction)]
            assert low <= ratio <= high, (subject, direction, ratio, peak)
