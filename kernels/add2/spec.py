"""add2: c = a + b in float32. Memory-bound: its roofline is the device's copy bandwidth
(12 bytes moved per element: two reads, one write)."""

import torch

from cudabench.spec import DTYPES, Baseline, Family, Param, Variant, empty_like


def make_inputs(shape, gen, device):
    n = shape["n"]
    a = torch.empty(n, device=device).uniform_(-1, 1, generator=gen)
    b = torch.empty(n, device=device).uniform_(-1, 1, generator=gen)
    return {"a": a, "b": b}


def reference(a, b):
    return a + b


def work(shape, direction):
    n = shape["n"]
    return float(n), 12.0 * n  # one add per element; read a and b, write c


SCALAR, VEC4, TILE = 0, 1, 2


def bind(variant):
    def make(ext):
        def add2(a, b):
            c = empty_like(a)
            ext.add2(a, b, c, variant)
            return c

        return add2

    return make


FAMILY = Family(
    name="add2",
    summary="c = a + b, float32, grid-stride loop",
    sources=("add2.cu", "add2.cpp"),
    params=(Param("n", 1 << 20, "number of elements"),),
    make_inputs=make_inputs,
    reference=reference,
    variants=(
        Variant("add2", "one element per thread per grid stride", bind(SCALAR), has_backward=False),
        Variant("add2-vec4", "float4 loads/stores, 4 independent float4 per thread in flight", bind(VEC4),
                has_backward=False),
        Variant("add2-tile", "one float4 per thread, one contiguous tile per block, one pass over n",
                bind(TILE), has_backward=False),
    ),
    baselines=(Baseline("torch-add", "PyTorch a + b", lambda: reference, has_backward=False, dtypes=DTYPES),),
    work=work,
    dtypes=DTYPES,
    bound="memory",
    tolerance=1e-6,
)
