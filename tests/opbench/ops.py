"""Ops of a user's package, with what benchmarking them needs: inputs and the reference."""

import torch


def fused_add(a, b):
    return a + b


def wrong_add(a, b):
    return a - b


def make_inputs(shape, gen, device):
    n = shape["n"]
    return {"a": torch.empty(n, device=device).uniform_(-1, 1, generator=gen),
            "b": torch.empty(n, device=device).uniform_(-1, 1, generator=gen)}


def reference(a, b):
    return a + b
