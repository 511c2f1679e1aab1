"""The attention family without a GPU: FLOP and byte accounting, the reference against the
definition, the constraints."""

import math
import sys

import pytest
import torch

from cudabench.spec.shapes import violation


@pytest.fixture(scope="module")
def family(registry):
    return registry.family("attention")


@pytest.mark.parametrize("causal", [0, 1])
def test_flops_follow_the_usual_convention(family, causal):
    shape = dict(B=4, H=16, N=4096, D=128, causal=causal)
    fwd, fwd_bytes = family.work(shape, "fwd")
    assert fwd == 4 * 4 * 16 * 4096**2 * 128 / (2 if causal else 1)  # two products; causal halves them
    assert family.work(shape, "bwd")[0] == 2.5 * fwd and family.work(shape, "fwdbwd")[0] == 3.5 * fwd
    assert fwd_bytes == 4 * 4 * (4 * 16 * 4096 * 128)  # q, k, v read, out written, float32


def test_reference_is_the_definition(family):
    gen = torch.Generator().manual_seed(3)
    inputs = family.make_inputs(dict(B=1, H=2, N=5, D=4, causal=1), gen, "cpu")
    q, k, v = (inputs[n].double() for n in "qkv")
    got = family.reference(q, k, v, True)
    for h in range(2):
        for i in range(5):
            weights = [math.exp(float(q[0, h, i] @ k[0, h, j]) / 2) for j in range(i + 1)]  # √D = 2
            expected = sum(w * v[0, h, j] for j, w in enumerate(weights)) / sum(weights)
            assert torch.allclose(got[0, h, i], expected, rtol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("tile", [1, 7 * 13, 2**25])  # a row per block, ragged blocks, one block
def test_blocked_reference_matches_the_definition_and_its_gradients(family, monkeypatch, causal, tile):
    monkeypatch.setattr(sys.modules[family.reference.__module__], "REFERENCE_TILE", tile)
    gen = torch.Generator().manual_seed(5)
    inputs = family.make_inputs(dict(B=2, H=3, N=13, D=8, causal=int(causal)), gen, "cpu")
    leaves = [inputs[n].double().requires_grad_() for n in "qkv"]
    dout = torch.randn(2, 3, 13, 8, generator=gen, dtype=torch.float64)
    results = []
    for op in (family.reference, sys.modules[family.reference.__module__].math_attention):
        out = op(*leaves, causal)
        results.append((out, *torch.autograd.grad(out, leaves, dout)))
    for got, expected in zip(*results):
        torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)
    torch.autograd.gradcheck(lambda q, k, v: family.reference(q, k, v, causal),
                             [x[:1, :1, :6, :4].detach().requires_grad_() for x in leaves])


def test_blocked_reference_gives_a_single_key_row_exactly_zero_query_and_key_gradients(family):
    q, k, v = (torch.randn(1, 2, 1, 64, dtype=torch.float64, requires_grad=True) for _ in range(3))
    out = family.reference(q, k, v, True)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), torch.randn_like(out))
    assert not dq.any() and not dk.any() and dv.abs().min() > 0  # softmax over one key is constant


def test_constraints_name_the_rule(family):
    naive = family.variant("attn-naive")
    assert violation(family, naive, dict(B=4, H=16, N=4096, D=128, causal=1)) is None
    assert "2^31" in violation(family, naive, dict(B=4, H=16, N=16384, D=128, causal=1))
    assert "causal must be 0 or 1" in violation(family, naive, dict(B=1, H=1, N=8, D=8, causal=2))


def test_flash_and_cudnn_sdpa_take_only_half_precisions(family):
    assert family.baseline("sdpa-flash").dtypes == ("bfloat16", "float16")
    assert "float32" in family.baseline("sdpa-efficient").dtypes and "float32" in family.baseline("eager").dtypes


def test_flash_variants_take_head_dims_64_and_128_and_their_precisions(family):
    flash1, flash2 = family.variant("attn-flash1"), family.variant("attn-flash2")
    assert flash1.dtypes == ("float32",) and flash2.dtypes == ("bfloat16", "float16")
    for variant in (flash1, flash2):
        for D in (64, 128):
            assert violation(family, variant, dict(B=4, H=16, N=16384, D=D, causal=1)) is None  # no N² buffer
        assert "head dimension 64 or 128" in violation(family, variant, dict(B=1, H=1, N=8, D=96, causal=0))


def test_the_flash_kernels_are_compiled_with_the_family(family):
    assert {"flash1.cu", "flash2.cu"} <= set(family.sources)
