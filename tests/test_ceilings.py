"""The device ceilings per precision, without a GPU: which ceiling a case's share is of, which peak
an impossible figure is judged against, and the cache that must not serve an older format."""

import json

import pytest

from cudabench.measure import ceilings as ceilings_module
from cudabench.measure.ceilings import Ceilings
from cudabench.measure.integrity import impossible

H100 = Ceilings("H100", "580", copy_bytes_per_s=3e12, sgemm_flops=50e12, fma_flops=67e12, measured="today",
                l2_bytes_per_s=8e12, bf16_gemm_flops=700e12, fp16_gemm_flops=720e12)


def test_the_gemm_share_is_of_the_cases_precision():
    flops, seconds = 350e9, 1e-3  # 350 TFLOP/s
    assert H100.of("sgemm", flops, 0, seconds, "bfloat16") == pytest.approx(0.5)
    assert H100.of("sgemm", flops, 0, seconds, "float16") == pytest.approx(350 / 720)
    assert H100.of("sgemm", 25e9, 0, seconds) == pytest.approx(0.5)  # float32: cuBLAS SGEMM
    assert H100.of("fma", flops, 0, seconds, "bfloat16") is None      # the FMA peak is float32's
    assert Ceilings("g", "d", 3e12, 5e13, 6e13, "today").of("sgemm", flops, 0, seconds, "bfloat16") is None


def test_a_low_precision_figure_is_held_to_the_tensor_core_gemm():
    fine = impossible(1e-3, 400e9, 0, H100, 0, False, "bfloat16")  # 400 TFLOP/s: far above fp32's peak
    assert fine.verdict == "pass" and "tensor-core GEMM" in fine.detail
    fooled = impossible(1e-3, 1200e9, 0, H100, 0, False, "bfloat16")  # 1.2 PFLOP/s: above the chip's peak
    assert fooled.verdict == "fail" and "150% of the bfloat16 tensor-core GEMM" in fooled.detail
    fp32 = impossible(1e-3, 100e9, 0, H100, 0, False, "float32")
    assert fp32.verdict == "fail" and "fp32 FMA peak" in fp32.detail


def test_an_entry_without_the_tensor_core_ceilings_is_measured_again(tmp_path, monkeypatch):
    monkeypatch.setattr(ceilings_module, "cache_root", lambda: tmp_path)
    old = {k: v for k, v in H100.__dict__.items() if not k.endswith("gemm_flops") or k == "sgemm_flops"}
    (tmp_path / "ceilings-3.json").write_text(json.dumps({"H100 / 580": old}))
    assert ceilings_module.load("H100", "580") is None
    ceilings_module.save(H100)
    assert ceilings_module.load("H100", "580") == H100


def test_an_l2_ceiling_that_was_not_measured_is_said_and_bounds_nothing():
    from dataclasses import replace

    unmeasured = replace(H100, l2_bytes_per_s=0.0)
    assert "within L2 not measured" in unmeasured.describe() and "0.00" not in unmeasured.describe()
    assert "within L2 8.00" in H100.describe()
    # 5 TB/s from a hot call whose 16 MB fit in a 50 MB L2: above DRAM copy, below L2
    hot_l2 = impossible(16e6 / 5e12, 0, 16e6, unmeasured, 50 << 20, False)
    assert hot_l2.verdict == "pass"  # not held to the DRAM copy bandwidth in its place
    assert impossible(16e6 / 5e12, 0, 16e6, H100, 50 << 20, False).verdict == "pass"
    assert impossible(16e6 / 20e12, 0, 16e6, H100, 50 << 20, False).verdict == "fail"  # beyond L2
    assert impossible(16e6 / 5e12, 0, 16e6, unmeasured, 50 << 20, True).verdict == "fail"  # cold: DRAM
