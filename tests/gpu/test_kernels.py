"""Every shipped variant, forward and backward, against the fp64 reference on several shapes."""

import os
import subprocess
import sys
import zlib

import pytest
import torch

from cudabench.spec.build import build
from cudabench.measure.check import check_workload, reference_results, relative_error
from cudabench.spec.registry import discover
from cudabench.spec.shapes import complete_shape, violation
from cudabench.measure.workload import make_workload

pytestmark = pytest.mark.gpu

SHAPES = {
    "add2": [dict(n=1), dict(n=5), dict(n=1000003), dict(n=2**20)],
    "matmul": [dict(M=1, N=1, K=1), dict(M=65, N=33, K=17), dict(M=256, N=256, K=256), dict(M=100, N=300, K=129),
               dict(M=128, N=384, K=40)],
    "sincos": [dict(n=1), dict(n=1000003)],
    "attention": [dict(B=1, H=2, N=37, D=64, causal=1), dict(B=2, H=3, N=129, D=128, causal=0),
                  dict(B=1, H=1, N=1, D=64, causal=1), dict(B=2, H=2, N=256, D=64, causal=0),
                  dict(B=1, H=2, N=100, D=128, causal=1), dict(B=1, H=2, N=1000, D=128, causal=1),
                  dict(B=2, H=1, N=700, D=64, causal=0)],
    "timex": [dict(B=8, C=4, T=32), dict(B=16, C=3, T=100), dict(B=8, C=2, T=1024), dict(B=24, C=7, T=252),
              dict(B=8, C=5, T=4), dict(B=3, C=5, T=37), dict(B=2, C=3, T=1500), dict(B=3, C=2, T=1025),
              dict(B=5, C=3, T=3001), dict(B=8, C=2, T=4096), dict(B=2, C=2, T=16384), dict(B=1, C=1, T=12000),
              # timex_fft_long.cu's rows of 8192 packed points (the product's pairs taken in the buffer)
              dict(B=3, C=2, T=5000), dict(B=2, C=1, T=8192),
              # timex-fft's warp-held transforms (timex_fft_warp.cu): N = 768, 1024, 1536 and 2048 (forward)
              dict(B=5, C=3, T=300), dict(B=7, C=2, T=400), dict(B=3, C=5, T=513), dict(B=1, C=3, T=768),
              dict(B=3, C=1, T=900),
              # timex-wgmma: two batch groups (the second of one row), T short of whole 64-step tiles; many
              # more items than blocks (each block takes several: both buffers, the mbarriers' phases turned)
              dict(B=33, C=3, T=760), dict(B=5, C=3, T=136), dict(B=64, C=300, T=64)],
}


def cases(registry):
    for family in registry.families:
        for variant in family.variants:
            for given in SHAPES.get(family.name, []):
                shape = complete_shape(family, given)
                if violation(family, variant, shape) is None:
                    yield family, variant, shape


CASES = list(cases(discover()))
IDS = [f"{v.name}-{'-'.join(f'{k}{x}' for k, x in s.items())}" for _, v, s in CASES]


@pytest.fixture(scope="module")
def extensions(registry):
    return {f.name: build(f).module for f in registry.families}


@pytest.mark.parametrize("family,variant,shape", CASES, ids=IDS)
def test_variant_matches_reference(extensions, family, variant, shape):
    """In float32, or for a variant without it (timex-mma) in its first precision."""
    from cudabench.measure.subject import in_dtype

    dtype = "float32" if "float32" in variant.dtypes else variant.dtypes[0]
    gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(str(shape).encode()))
    inputs = in_dtype(family.make_inputs(shape, gen, "cuda"), dtype)
    op = variant.bind(extensions[family.name])
    directions = ["fwd", "fwdbwd", "bwd"] if family.grad_inputs else ["fwd"]
    for direction in directions:
        grad_out = None
        if direction != "fwd":
            out = reference_results(family, inputs, "fwd")["out"]
            grad_out = torch.empty(out.shape, device="cuda").uniform_(-1, 1, generator=gen)
            grad_out = in_dtype({"g": grad_out}, dtype)["g"]
        ref = reference_results(family, inputs, direction, grad_out)
        wl = make_workload(op, inputs, direction, family.grad_inputs, grad_out)
        check = check_workload(wl, ref, family.tolerance_for(dtype))
        assert check.passed, f"{variant.name} {direction} at {shape}: {dict(check.errors)}"
        assert set(dict(check.errors)) == set(ref), "every output and gradient was compared"


def test_every_variant_has_cases(registry):
    assert {v.name for _, v, _ in CASES} == {v.name for _, v in registry.variants()}


@pytest.mark.parametrize("shape", [dict(B=8, C=16, T=256), dict(B=32, C=4, T=768)])
def test_timex_variants_on_rwkv_like_inputs(registry, extensions, shape):
    """w an exponential decay, k = exp(N(0,1)): the inputs RWKV feeds TimeX."""
    family = registry.family("timex")
    gen = torch.Generator(device="cuda").manual_seed(11)
    inputs = family.inputs(complete_shape(family, shape), gen, "cuda", "rwkv")
    out = reference_results(family, inputs, "fwd")["out"]
    grad_out = torch.empty(out.shape, device="cuda").uniform_(-1, 1, generator=gen)
    ref = reference_results(family, inputs, "fwdbwd", grad_out)
    covered = [v for v in family.variants
               if violation(family, v, complete_shape(family, shape)) is None and "float32" in v.dtypes]
    # the shapes are picked so that the whole float32 ladder runs: a filter that drops them all fails here
    assert {v.name for v in covered} >= {"timex-v1", "timex-v2", "timex-v3", "timex-fft"}, [v.name for v in covered]
    for variant in covered:
        op = variant.bind(extensions["timex"])
        check = check_workload(make_workload(op, inputs, "fwdbwd", family.grad_inputs, grad_out), ref, 1e-5)
        assert check.passed, f"{variant.name}: {dict(check.errors)}"
        assert set(dict(check.errors)) == set(ref), f"{variant.name}: every output and gradient compared"


def check_forward_and_gradients(family, op, inputs, out_like, dtype, gen, where):
    """fwdbwd against the fp64 reference within the precision's tolerance, every output and gradient
    compared; the output gradient is uniform in [-1, 1], shaped and typed like `out_like`."""
    grad_out = torch.empty(out_like.shape, device="cuda").uniform_(-1, 1, generator=gen).to(out_like.dtype)
    ref = reference_results(family, inputs, "fwdbwd", grad_out)
    check = check_workload(make_workload(op, inputs, "fwdbwd", family.grad_inputs, grad_out), ref,
                           family.tolerance_for(dtype))
    assert check.passed, f"{where}: {dict(check.errors)}"
    assert set(dict(check.errors)) == set(ref)


LOW_PRECISION_CASES = [("timex-fft", shape) for shape in (
    dict(B=3, C=5, T=37), dict(B=8, C=4, T=768), dict(B=64, C=2, T=100), dict(B=3, C=2, T=1025),
    dict(B=5, C=3, T=3001), dict(B=2, C=2, T=16384))] + [("timex-mma", shape) for shape in (
    dict(B=3, C=5, T=37), dict(B=32, C=4, T=768), dict(B=70, C=3, T=100), dict(B=33, C=2, T=1025),
    dict(B=17, C=2, T=2048), dict(B=1, C=1, T=1))] + [("timex-wgmma", shape) for shape in (
    dict(B=1, C=1, T=8), dict(B=70, C=3, T=104), dict(B=33, C=2, T=760))]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("name, shape", LOW_PRECISION_CASES)
def test_timex_in_low_precision_matches_the_reference(registry, extensions, dtype, name, shape):
    """Inputs and outputs in bfloat16 / float16, sums in float32: forward and both gradients within
    the precision's tolerance of the fp64 reference on the rounded inputs, uniform and RWKV-like.
    (Batches past one block's rows (fft: B=64; mma: B=70, 33, 17) sum gw from float partial sums;
    T=37, 100, 1025 are not multiples of mma's 16- and 32-wide tiles.)"""
    from cudabench.measure.subject import in_dtype

    family = registry.family("timex")
    op = family.variant(name).bind(extensions["timex"])
    for kind in ("uniform", "rwkv"):
        gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(f"{shape}{dtype}{kind}".encode()))
        inputs = in_dtype(family.inputs(complete_shape(family, shape), gen, "cuda", kind), dtype)
        check_forward_and_gradients(family, op, inputs, inputs["k"], dtype, gen, f"{dtype} {kind} at {shape}")
        out = op(**inputs)
        assert out.dtype == getattr(torch, dtype)


def test_timex_wgmma_backward_takes_a_misaligned_gradient(registry, extensions):
    """A gradient that starts 2 bytes into its storage (contiguous, not 16-byte aligned, as a view may be):
    timex-wgmma's backward, whose rows go by TMA, copies it rather than failing, and its gradients match
    timex-mma's."""
    if extensions["timex"].wgmma_not_here():
        pytest.skip(extensions["timex"].wgmma_not_here())
    family, (B, C, T) = registry.family("timex"), (3, 2, 64)
    gen = torch.Generator(device="cuda").manual_seed(7)
    w = torch.rand(C, T, device="cuda", generator=gen).bfloat16()
    k = torch.rand(B, C, T, device="cuda", generator=gen).bfloat16()
    g = torch.randn(B * C * T + 1, device="cuda", generator=gen).bfloat16()[1:].view(B, C, T)
    assert g.is_contiguous() and g.data_ptr() % 16
    grads = {}
    for name in ("timex-wgmma", "timex-mma"):
        op = family.variant(name).bind(extensions["timex"])
        w_, k_ = w.clone().requires_grad_(), k.clone().requires_grad_()
        op(w=w_, k=k_, eps=0.5).backward(g)
        grads[name] = (w_.grad.float(), k_.grad.float())
    for ours, theirs in zip(grads["timex-wgmma"], grads["timex-mma"]):
        torch.testing.assert_close(ours, theirs, rtol=2e-2, atol=2e-2)


def test_timex_kernels_other_than_fft_refuse_low_precision_and_mma_float32(extensions):
    w = torch.rand(4, 64, device="cuda", dtype=torch.bfloat16)
    k = torch.rand(8, 4, 64, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match="float32 for timex-v4"):
        extensions["timex"].forward(w, k, torch.empty_like(k), 0.1, 4)
    with pytest.raises(RuntimeError, match="bfloat16 or float16 for timex-mma"):
        extensions["timex"].forward(w.float(), k.float(), torch.empty_like(k.float()), 0.1, 7)
    long_w, long_k = torch.rand(1, 2049, device="cuda", dtype=torch.bfloat16), torch.rand(1, 1, 2049, device="cuda",
                                                                                          dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match="T must be at most 2048"):
        extensions["timex"].forward(long_w, long_k, torch.empty_like(long_k), 0.1, 7)


def test_binding_rejects_broken_constraint(registry, extensions):
    ext = extensions["timex"]
    w = torch.rand(4, 766, device="cuda")
    k = torch.rand(8, 4, 766, device="cuda")
    out = torch.empty_like(k)
    with pytest.raises(RuntimeError, match="multiple of 4"):
        ext.forward(w, k, out, 0.1, 3)


def test_binding_rejects_cpu_tensor(registry, extensions):
    a = torch.rand(10)
    with pytest.raises(RuntimeError, match="CUDA tensor"):
        extensions["add2"].add2(a, a, a)


def test_second_build_is_a_cache_hit(tmp_path):
    """As a user sees it: the second `cudabench build` of the same sources is a cache hit."""
    env = {**os.environ, "CUDABENCH_CACHE": str(tmp_path)}
    command = [sys.executable, "-m", "cudabench", "build", "--kernel", "add2"]
    first = subprocess.run(command, capture_output=True, text=True, env=env)
    second = subprocess.run(command, capture_output=True, text=True, env=env)
    assert first.returncode == 0 and "(compiled)" in first.stdout, first.stdout + first.stderr
    assert second.returncode == 0 and "(cache hit)" in second.stdout, second.stdout + second.stderr


def test_timex_fft_survives_any_order_of_lengths_in_one_process(registry, extensions):
    """A worker of a multi-GPU run gets cases in any order. timex-fft once set its kernel's
    shared-memory limit to each new T's need, so a short T first seen after a long one lowered the
    limit, and the long one (its occupancy cached) then failed: 'invalid argument'."""
    family = registry.family("timex")
    op = family.variant("timex-fft").bind(extensions["timex"])
    for T in (1024, 61, 1024, 45, 768, 1024):  # 61 and 45: lengths no other test uses first
        shape = dict(B=4, C=3, T=T)
        gen = torch.Generator(device="cuda").manual_seed(T)
        inputs = family.make_inputs(shape, gen, "cuda")
        out = reference_results(family, inputs, "fwd")["out"]
        grad_out = torch.empty(out.shape, device="cuda").uniform_(-1, 1, generator=gen)
        ref = reference_results(family, inputs, "fwdbwd", grad_out)
        check = check_workload(make_workload(op, inputs, "fwdbwd", family.grad_inputs, grad_out), ref,
                               family.tolerance)
        assert check.passed, f"T={T}: {dict(check.errors)}"


@pytest.mark.parametrize("T", [3001, 16384])
def test_timex_fft_backward_reads_the_spectra_its_forward_kept(extensions, T):
    """Beyond T = 1024 autograd's forward keeps the weights' and each row's spectra for the backward. Given
    them it gives gk bit for bit as the backward that makes its own (gw to its atomics' order), twice in a
    row (a stored forward's backward may run again), and it refuses a tensor of another size. At T <= 1024
    nothing is kept."""
    ext = extensions["timex"]
    B, C = 2, 3
    gen = torch.Generator(device="cuda").manual_seed(T)
    w, k, g = (torch.empty(*shape, device="cuda").uniform_(-1, 1, generator=gen)
               for shape in ((C, T), (B, C, T), (B, C, T)))
    out, plain = torch.empty_like(k), torch.empty_like(k)
    saved = ext.forward_saving(w, k, out, 0.5)
    ext.forward(w, k, plain, 0.5, 6)
    assert saved is not None and saved.numel() > 0 and torch.equal(out, plain)
    gw, gk = torch.empty_like(w), torch.empty_like(k)
    ext.backward(w, k, g, gw, gk, 6)
    for _ in range(2):
        gw_kept, gk_kept = torch.full_like(w, float("nan")), torch.full_like(k, float("nan"))
        ext.backward_saved(w, k, g, gw_kept, gk_kept, saved)
        assert torch.equal(gk_kept, gk)
        assert relative_error(gw_kept, gw.double()) < 1e-6  # float atomics: the sums' order varies
    with pytest.raises(RuntimeError, match="saved must be what forward_saving returned"):
        ext.backward_saved(w, k, g, gw, gk, saved[:-1])
    short = k[..., :768].contiguous()
    assert ext.forward_saving(w[:, :768].contiguous(), short, torch.empty_like(short), 0.5) is None


ATTENTION_LOW_PRECISION = [dict(B=1, H=2, N=37, D=64, causal=1), dict(B=2, H=3, N=129, D=128, causal=0),
                           dict(B=1, H=1, N=1, D=128, causal=1), dict(B=2, H=2, N=1000, D=128, causal=1),
                           dict(B=1, H=4, N=2048, D=64, causal=0), dict(B=1, H=2, N=4096, D=128, causal=1),
                           dict(B=3, H=1, N=200, D=64, causal=1)]


@pytest.mark.parametrize("variant", ["attn-flash2", "attn-flash3"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("shape", ATTENTION_LOW_PRECISION, ids=lambda s: "-".join(f"{k}{v}" for k, v in s.items()))
def test_attn_flash2_and_3_in_both_half_precisions(registry, extensions, variant, dtype, shape):
    """The tensor-core rungs' forward and all three gradients within the precision's tolerance of the
    fp64 reference on the rounded inputs: causal and not, D 64 and 128, N ragged against their 64- and
    128-row tiles (37, 129, 1000, 200), one key (N=1), and several query tiles per key tile. attn-flash3
    is skipped on a GPU that is not a Hopper one."""
    from cudabench.errors import NotOnThisGPUError
    from cudabench.measure.subject import in_dtype

    family = registry.family("attention")
    try:
        op = family.variant(variant).bind(extensions["attention"])
    except NotOnThisGPUError as e:
        pytest.skip(str(e))
    gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(f"{shape}{dtype}".encode()))
    inputs = in_dtype(family.make_inputs(complete_shape(family, shape), gen, "cuda"), dtype)
    check_forward_and_gradients(family, op, inputs, inputs["q"], dtype, gen, f"{dtype} at {shape}")


def test_attn_flash2_refuses_float32_and_other_head_dims(registry, extensions):
    family = registry.family("attention")
    op = family.variant("attn-flash2").bind(extensions["attention"])
    q = torch.randn(1, 1, 64, 64, device="cuda")
    with pytest.raises(RuntimeError, match="bfloat16 or float16"):
        op(q, q, q, True)
    h = torch.randn(1, 1, 64, 96, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match="head dimension D = 64 or 128"):
        op(h, h, h, True)
