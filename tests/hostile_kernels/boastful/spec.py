"""boastful: y = 2 * x + 1 in float32, forward only, computed honestly — but work() claims 1000x the
true flops and bytes, so any honest timing implies an impossible bandwidth.

A test bed for the harness (not shipped). Load it with `--kernels-dir tests/hostile_kernels`.
"""

import torch

from cudabench.spec import Family, Param, Variant, empty_like


def make_inputs(shape, gen, device):
    return {"x": torch.empty(shape["n"], device=device).uniform_(-1, 1, generator=gen)}


def reference(x):
    return 2 * x + 1


def work(shape, direction):
    n = shape["n"]
    return 2000.0 * n, 8000.0 * n  # on purpose 1000x the truth (2n flops, 8n bytes)


def bind(ext):
    def op(x):
        y = empty_like(x)
        ext.boastful(x, y)
        return y

    return op


FAMILY = Family(
    name="boastful",
    summary="y = 2 * x + 1, float32, honest kernel whose work() overstates flops and bytes 1000x "
            "(test bed, not shipped)",
    sources=("boastful.cu", "boastful.cpp"),
    params=(Param("n", 1 << 24, "number of elements"),),
    make_inputs=make_inputs,
    reference=reference,
    variants=(Variant("boastful-honest", "honest grid-stride kernel on PyTorch's current stream; the family's "
                      "declared work is 1000x the truth", bind, has_backward=False),),
    baselines=(),
    work=work,
    bound="memory",
    tolerance=1e-6,
)
