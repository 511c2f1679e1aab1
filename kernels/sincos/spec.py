"""sincos: y = sin²x + cos²x — what operator fusion buys. Eager PyTorch launches five kernels
(sin, pow, cos, pow, add), each a full pass over memory; torch.compile (Inductor) fuses them into
one Triton kernel; the CUDA variant is that one pass written by hand. Memory-bound at large n."""

import torch

from cudabench.spec import DTYPES, Baseline, Family, Param, Variant, compiled, empty_like


def make_inputs(shape, gen, device):
    return {"x": torch.empty(shape["n"], device=device).uniform_(-10, 10, generator=gen)}


def reference(x):
    return torch.sin(x) ** 2 + torch.cos(x) ** 2


def work(shape, direction):
    return 0.0, 8.0 * shape["n"]  # the fused minimum: read x, write y


def bind_fused(ext):
    def sincos(x):
        y = empty_like(x)
        ext.sincos(x, y)
        return y

    return sincos


FAMILY = Family(
    name="sincos",
    summary="y = sin²x + cos²x: eager (5 kernels) vs torch.compile vs one fused CUDA kernel",
    sources=("sincos.cu", "sincos.cpp"),
    params=(Param("n", 1 << 26, "number of elements"),),
    make_inputs=make_inputs,
    reference=reference,
    variants=(Variant("sincos-fused", "one pass: float4 load, sincosf, float4 store", bind_fused,
                      has_backward=False),),
    baselines=(
        Baseline("eager", "torch.sin(x)**2 + torch.cos(x)**2: five kernels", lambda: reference, has_backward=False,
                 dtypes=DTYPES),
        Baseline("torch-compile", "torch.compile of the same expression (Inductor: one Triton kernel)",
                 lambda: compiled(reference), has_backward=False, dtypes=DTYPES),
    ),
    dtypes=DTYPES,
    work=work,
    tolerance=1e-6,
    bound="memory",
    report_launches=True,
)
