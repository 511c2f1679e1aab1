"""scale: y = alpha * x + beta in float32, forward only — an out-of-tree example family.

Load it with `cudabench list --kernels-dir examples/my_kernels`.
"""

import torch

from cudabench.spec import Baseline, Family, Param, Variant, empty_like


def make_inputs(shape, gen, device):
    x = torch.empty(shape["n"], device=device).uniform_(-1, 1, generator=gen)
    # scalars away from 0 (and alpha away from 1), so a kernel that ignores either fails the check
    alpha = torch.empty((), device=device).uniform_(1.1, 2.0, generator=gen).item()
    beta = torch.empty((), device=device).uniform_(0.1, 1.0, generator=gen).item()
    return {"x": x, "alpha": alpha, "beta": beta}


def reference(x, alpha, beta):
    return alpha * x + beta


def work(shape, direction):
    n = shape["n"]
    return 2.0 * n, 8.0 * n  # a multiply and an add per element; read x, write y


def bind_scale(ext):
    def scale(x, alpha, beta):
        y = empty_like(x)
        ext.scale(x, alpha, beta, y)
        return y

    return scale


FAMILY = Family(
    name="scale",
    summary="y = alpha * x + beta, float32, grid-stride loop (example of an out-of-tree family)",
    sources=("scale.cu", "scale.cpp"),
    params=(Param("n", 1 << 20, "number of elements"),),
    make_inputs=make_inputs,
    reference=reference,
    variants=(Variant("scale", "one fused multiply-add per element", bind_scale, has_backward=False),),
    baselines=(Baseline("torch-scale", "PyTorch alpha * x + beta", lambda: reference, has_backward=False),),
    work=work,
    tolerance=1e-6,
)
