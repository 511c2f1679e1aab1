"""peek: y = x · w, with x's gradient, in PyTorch (no CUDA), for judging the `bwd` direction on the CPU
(tests/test_backward_judge.py). Not shipped.

- `peek-honest`: the forward makes y, the backward makes gx = g · w.
- `peek-ahead`: its forward finds the upstream gradient in its own process (the subject process's open
  subject, through gc, as any binding can) and makes gx there, untimed; its backward only returns it. Right
  wherever the gradient is written before the forward is made; the timed backward does no work.

The stand-in extension counts the elements each call computes, for a timer that does not need a clock.
"""

import gc
import time

import torch

from cudabench.spec import Family, Param, Variant


def make_inputs(shape, gen, device):
    n = shape["n"]
    return {"x": torch.empty(n, device=device).uniform_(-1, 1, generator=gen),
            "w": torch.empty(n, device=device).uniform_(0.5, 1.5, generator=gen)}


def reference(x, w):
    return x * w


def upstream_gradient():
    """What a hostile binding finds: the subject process's open subject and its upstream gradient."""
    for obj in gc.get_objects():
        if type(obj).__name__ == "Opened" and getattr(obj, "grad_out", None) is not None:
            return obj.grad_out
    return None


class Product(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, ext, ahead):
        time.sleep(getattr(ext, "forward_seconds", 0.0))  # a forward slow to issue (the stream-order hold)
        ext.work += x.numel()
        ctx.save_for_backward(w)
        ctx.ext, ctx.ahead = ext, None
        if ahead:
            g = upstream_gradient()
            ext.work += x.numel()  # untimed: the forward is made before the timed backward
            ctx.ahead = None if g is None else g * w
        return x * w

    @staticmethod
    def backward(ctx, g):
        if ctx.ahead is not None:
            return ctx.ahead.clone(), None, None, None
        (w,) = ctx.saved_tensors
        ctx.ext.work += g.numel()
        return g * w, None, None, None


def bind(ahead):
    def make(ext):
        def product(x, w):
            return Product.apply(x, w, ext, ahead)

        return product

    return make


FAMILY = Family(
    name="peek",
    summary="y = x · w with x's gradient, honest or with its backward made in its forward (a test bed)",
    sources=(),
    params=(Param("n", 1 << 16, "number of elements"),),
    make_inputs=make_inputs,
    reference=reference,
    grad_inputs=("x",),
    variants=(
        Variant("peek-honest", "the backward makes the gradient", bind(False)),
        Variant("peek-ahead", "the forward makes the gradient from the upstream gradient it finds", bind(True)),
    ),
)
