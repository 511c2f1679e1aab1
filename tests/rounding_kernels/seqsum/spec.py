"""seqsum: running sums out[b, t] = x[b, 0] + … + x[b, t] with pure-PyTorch "kernels" (no CUDA), for the
judge's allowance on sums of equal terms (tests/test_summation_judge.py). Not shipped.

- `seqsum-honest` adds the terms one by one in float32, as a direct-sum kernel does (timex-v1..v5): on
  the constant kind at T = 2048 that errs about 1e-5, past the family's tolerance (2e-6 here, so that
  most constant draws show it), within T float32 roundoffs (1.2e-4).
- `seqsum-tuned` is the same, 1e-3 off where every value of a row is equal: a kernel wrong on ties,
  which the widened tolerance must still catch.

The stand-in extension counts the elements each call computes, for a timer that does not need a clock.
"""

import numpy as np
import torch

from cudabench.spec import Family, Param, Variant


def make_inputs(shape, gen, device):
    return {"x": torch.empty(shape["B"], shape["T"], device=device).normal_(0, 1, generator=gen)}


def reference(x):
    return torch.cumsum(x, dim=1)


def reduction(shape, direction):
    """Output t sums t + 1 terms."""
    return shape["T"]


def bind(tuned):
    def make(ext):
        def running_sum(x):
            ext.work += x.numel()
            out = torch.from_numpy(np.cumsum(x.detach().cpu().numpy(), axis=1, dtype=np.float32))
            ties = (x == x[:, :1]).all(dim=1, keepdim=True)
            return torch.where(ties, out * (1 + 1e-3), out) if tuned else out

        return running_sum

    return make


FAMILY = Family(
    name="seqsum",
    summary="running sums, added one by one in float32 (a test bed)",
    sources=(),
    params=(Param("B", 2, "rows"), Param("T", 2048, "terms of the last sum")),
    make_inputs=make_inputs,
    reference=reference,
    tolerance=2e-6,
    reduction=reduction,
    input_kinds=("normal",),
    variants=(
        Variant("seqsum-honest", "float32, one term after another", bind(False)),
        Variant("seqsum-tuned", "the same, 1e-3 off on rows of equal values", bind(True)),
    ),
)
