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
