"""roundattn: the attention family's math with a pure-PyTorch "kernel" (no CUDA), for judging low-precision
attention on the CPU (tests/test_rounding_judge.py). Not shipped.

- `roundattn-honest` computes what every flash kernel does in bfloat16/float16: float32 sums, P and dS
  rounded for the products, rowsum(dO∘O) from the stored output (the attention family's rounded_reference).
  On some outliers draws that alone misses the tolerance; the judge must not make it INVALID for that.
- `roundattn-tuned` is the same on the family's own normal values and 10 % off on anything else (large or
  zero values, heavy tails): a kernel tuned to one input distribution, which the judge must still catch.
- `roundattn-sloppy` is 3 % off everywhere, as a kernel that sums in the lower precision: within what a widened
  outliers draw allows, past the family's tolerance.

The stand-in extension counts the elements each call computes, for a timer that does not need a clock.
"""


from cudabench.spec import DTYPES, Family, Variant
from cudabench.spec.registry import discover

ATTENTION = discover().family("attention")


def normal_looking(q, k, v):
    """What the tuned kernel was tuned to: the family's N(0, 1) draws (no large values, few exact zeros)."""
    return all(float(t.detach().abs().max()) < 8 and float((t.detach() == 0).float().mean()) < 0.05 for t in (q, k, v))


def bind(tuned, off=1.0):
    def make(ext):
        def attention(q, k, v, causal):
            ext.work += q.numel()
            out = ATTENTION.rounded_reference(q, k, v, causal) * off
            return out if not tuned or normal_looking(q, k, v) else out * 1.1

        return attention

    return make


FAMILY = Family(
    name="roundattn",
    summary="the attention family's math in PyTorch, honest or tuned to its own inputs (a test bed)",
    sources=(),
    params=ATTENTION.params,
    make_inputs=ATTENTION.make_inputs,
    reference=ATTENTION.reference,
    rounded_reference=ATTENTION.rounded_reference,
    grad_inputs=ATTENTION.grad_inputs,
    dtypes=DTYPES,
    tolerance=ATTENTION.tolerance,
    large_inputs=ATTENTION.large_inputs,
    variants=(
        Variant("roundattn-honest", "P and dS rounded as flash kernels round them", bind(False), dtypes=DTYPES),
        Variant("roundattn-tuned", "right on the family's own inputs only", bind(True), dtypes=DTYPES),
        Variant("roundattn-sloppy", "3 % off everywhere (as a kernel that sums in the lower precision)",
                bind(False, off=1.03), dtypes=DTYPES),
    ),
)
