"""The fp64 references against the math written as plain Python loops, on tiny shapes."""

import pytest
import torch

from cudabench.measure.check import reference_results


def timex_loops(w, k, eps, g):
    B, C, T = k.shape
    out = torch.zeros(B, C, T, dtype=torch.float64)
    gk = torch.zeros(B, C, T, dtype=torch.float64)
    gw = torch.zeros(C, T, dtype=torch.float64)
    for b in range(B):
        for c in range(C):
            for t in range(T):
                out[b, c, t] = eps + sum(w[c, T - 1 - (t - u)] * k[b, c, u] for u in range(t + 1))
                gk[b, c, t] = sum(g[b, c, s] * w[c, T - 1 - (s - t)] for s in range(t, T))
    for c in range(C):
        for j in range(T):
            gw[c, j] = sum(g[b, c, T - 1 - j + u] * k[b, c, u] for b in range(B) for u in range(j + 1))
    return out, gw, gk


@pytest.mark.parametrize("B, C, T", [(2, 3, 5), (1, 2, 8), (3, 1, 1), (1, 2, 32), (2, 1, 33)])  # transforms 2 to 128 long
def test_timex_reference_forward_and_gradients_match_the_loops(registry, B, C, T):
    family = registry.family("timex")
    gen = torch.Generator().manual_seed(B * 100 + C * 10 + T)
    inputs = family.make_inputs({"B": B, "C": C, "T": T}, gen, "cpu")
    g = torch.empty(B, C, T).uniform_(-1, 1, generator=gen)
    ref = reference_results(family, inputs, "fwdbwd", g)
    out, gw, gk = timex_loops(inputs["w"].double(), inputs["k"].double(), inputs["eps"], g.double())
    torch.testing.assert_close(ref["out"], out)
    torch.testing.assert_close(ref["gw"], gw)
    torch.testing.assert_close(ref["gk"], gk)


def test_timex_inputs_are_random_not_zero(registry):
    family = registry.family("timex")
    a = family.make_inputs({"B": 2, "C": 3, "T": 16}, torch.Generator().manual_seed(1), "cpu")
    b = family.make_inputs({"B": 2, "C": 3, "T": 16}, torch.Generator().manual_seed(2), "cpu")
    assert (a["k"] != 0).all() and not torch.equal(a["k"], b["k"]) and a["eps"] != b["eps"]


def test_matmul_reference_matches_loops(registry):
    family = registry.family("matmul")
    inputs = family.make_inputs({"M": 3, "N": 4, "K": 5}, torch.Generator().manual_seed(0), "cpu")
    A, B = inputs["A"].double(), inputs["B"].double()
    loops = torch.tensor([[sum(A[i, k] * B[k, j] for k in range(5)) for j in range(4)] for i in range(3)],
                         dtype=torch.float64)
    torch.testing.assert_close(reference_results(family, inputs, "fwd")["out"], loops)


def test_add2_reference(registry):
    family = registry.family("add2")
    inputs = family.make_inputs({"n": 10}, torch.Generator().manual_seed(0), "cpu")
    torch.testing.assert_close(reference_results(family, inputs, "fwd")["out"],
                               inputs["a"].double() + inputs["b"].double())


def test_work_counts(registry):
    timex = registry.family("timex")
    flops, nbytes = timex.work({"B": 32, "C": 768, "T": 768}, "fwd")
    assert flops == pytest.approx(14.5e9, rel=0.01)  # the 14.5 GFLOP per pass
    assert timex.work({"B": 32, "C": 768, "T": 768}, "fwdbwd")[0] == pytest.approx(3 * flops)
    assert registry.family("matmul").work({"M": 2, "N": 3, "K": 4}, "fwd")[0] == 48


def test_rwkv_like_timex_inputs(registry):
    family = registry.family("timex")
    inputs = family.inputs({"B": 2, "C": 3, "T": 16}, torch.Generator().manual_seed(3), "cpu", "rwkv")
    w, k = inputs["w"], inputs["k"]
    assert (k > 0).all() and (w > 0).all() and (w <= 1).all()
    assert (w[:, 1:] >= w[:, :-1]).all()  # w[c, T-1-j] decays with the distance j
    assert torch.equal(w[:, -1], torch.ones(3))


def test_fft_baseline_matches_the_reference(registry):
    family = registry.family("timex")
    inputs = family.make_inputs({"B": 2, "C": 3, "T": 20}, torch.Generator().manual_seed(4), "cpu")
    ref = reference_results(family, inputs, "fwd")["out"]
    got = family.baseline("fft").make()(**inputs)
    assert torch.linalg.vector_norm(got.double() - ref) / torch.linalg.vector_norm(ref) < 1e-6


def test_sincos_reference_is_one(registry):
    family = registry.family("sincos")
    inputs = family.make_inputs({"n": 100}, torch.Generator().manual_seed(0), "cpu")
    torch.testing.assert_close(reference_results(family, inputs, "fwd")["out"], torch.ones(100, dtype=torch.float64))


@pytest.mark.parametrize("kind", ["uniform", "rwkv"])
def test_timex_fft_reference_agrees_with_the_direct_convolution_in_float64(registry, kind):
    """The fp64 reference is a product of spectra; at a long odd length its forward and gradients
    stay within 1e-13 (norm-wise) of the direct convolution, far inside any fp32 tolerance."""
    import importlib.util

    family = registry.family("timex")
    spec = importlib.util.spec_from_file_location("timex_spec", family.folder / "spec.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    gen = torch.Generator().manual_seed(7)
    inputs = family.make_inputs({"B": 3, "C": 4, "T": 777}, gen, "cpu", kind)
    g = torch.empty(3, 4, 777).uniform_(-1, 1, generator=gen)
    ref = reference_results(family, inputs, "fwdbwd", g)
    w, k = (inputs[n].double().requires_grad_() for n in ("w", "k"))
    out = module.direct(w, k, inputs["eps"])
    gw, gk = torch.autograd.grad(out, (w, k), g.double())
    for name, want in (("out", out), ("gw", gw), ("gk", gk)):
        assert float((ref[name] - want.detach()).norm() / want.detach().norm()) < 1e-13, name
