"""The Hopper rungs (issue 29) on the GPU. matmul-wgmma: the bf16 product against the fp64 reference at
shapes of whole tiles in several counts, both tile widths of the kernel, the refusals, and a judged `run`
beside cuBLAS. attn-flash3: a judged `run` beside cuDNN's SDPA (its ragged shapes against the reference
are tests/gpu/test_kernels.py's, with attn-flash2's). On a GPU that is not a Hopper one: skipped, with
the reason."""

import json
import subprocess
import sys

import pytest
import torch

from cudabench.measure.check import check_workload, reference_results
from cudabench.measure.subject import in_dtype
from cudabench.measure.workload import make_workload
from cudabench.spec.build import build

pytestmark = pytest.mark.gpu

SHAPES = [(128, 256, 64), (256, 512, 192), (384, 768, 1024), (1280, 2304, 320), (2048, 2048, 2048)]


@pytest.fixture(scope="module")
def family(registry):
    return registry.family("matmul")


@pytest.fixture(scope="module")
def ext(family):
    module = build(family).module
    if module.matmul_wgmma_not_here():
        pytest.skip(module.matmul_wgmma_not_here())
    return module


def inputs(family, M, N, K, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return in_dtype(family.make_inputs({"M": M, "N": N, "K": K}, gen, "cuda"), "bfloat16")


@pytest.mark.parametrize("M,N,K", SHAPES, ids=[f"{m}x{n}x{k}" for m, n, k in SHAPES])
def test_matches_the_fp64_reference(family, ext, M, N, K):
    x = inputs(family, M, N, K, M + N + K)
    check = check_workload(make_workload(family.variant("matmul-wgmma").bind(ext), x, "fwd"),
                           reference_results(family, x, "fwd"), family.tolerance_for("bfloat16"))
    assert check.passed, dict(check.errors)


@pytest.mark.parametrize("M,N,K", [(128, 128, 64), (384, 640, 448)])
def test_the_128_wide_tiles_too(family, ext, M, N, K):
    x = inputs(family, M, N, K, 7)
    C = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    ext.matmul_wgmma(x["A"], x["B"], C, 128)
    ref = reference_results(family, x, "fwd")["out"]
    err = (C.double() - ref).norm() / ref.norm()
    assert err < family.tolerance_for("bfloat16"), float(err)


def test_refusals_name_the_rule(family, ext):
    x = inputs(family, 128, 256, 96, 3)  # K not a multiple of 64
    C = torch.empty(128, 256, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match="K of 64"):
        ext.matmul_wgmma(x["A"], x["B"], C, 256)
    with pytest.raises(RuntimeError, match="BFloat16|bfloat16"):
        ext.matmul_wgmma(x["A"].float(), x["B"], C, 256)


def judged_run(tmp_path, *args):
    """`cudabench run ARGS --timing events`: its rows by subject, each timed with no integrity check failed."""
    out = tmp_path / "r.json"
    done = subprocess.run([sys.executable, "-m", "cudabench", "run", *args, "--timing", "events", "--json", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {(r["subject"], r["case"]["direction"]): r for r in json.loads(out.read_text())["results"]}
    for row in rows.values():
        assert row["stats"] and not row.get("skipped"), row
        assert all(c["verdict"] != "fail" for c in row["integrity"]), row["integrity"]
    return rows


def test_a_judged_run_beside_cublas(tmp_path, ext):
    rows = judged_run(tmp_path, "-k", "matmul-wgmma", "--dtype", "bfloat16", "--shape", "M=1024,N=1024,K=1024")
    assert {subject for subject, _ in rows} == {"matmul-wgmma", "torch-matmul"}


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_attn_flash3_judged_beside_cudnn(tmp_path, ext, dtype):
    rows = judged_run(tmp_path, "-k", "attn-flash3", "-b", "sdpa-cudnn", "--dtype", dtype, "-d", "fwd", "-d", "fwdbwd",
                      "--shape", "B=2,H=4,N=1000,D=128,causal=1")
    assert set(rows) == {(s, d) for s in ("attn-flash3", "sdpa-cudnn") for d in ("fwd", "fwdbwd")}
