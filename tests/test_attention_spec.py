"""The attention family without a GPU: FLOP and byte accounting, the reference against the
definition, the constraints."""

import math

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


def test_constraints_name_the_rule(family):
    naive = family.variant("attn-naive")
    assert violation(family, naive, dict(B=4, H=16, N=4096, D=128, causal=1)) is None
    assert "2^31" in violation(family, naive, dict(B=4, H=16, N=16384, D=128, causal=1))
    assert "causal must be 0 or 1" in violation(family, naive, dict(B=1, H=1, N=8, D=8, causal=2))


def test_flash_and_cudnn_sdpa_take_only_half_precisions(family):
    assert family.baseline("sdpa-flash").dtypes == ("bfloat16", "float16")
    assert "float32" in family.baseline("sdpa-efficient").dtypes and "float32" in family.baseline("eager").dtypes
