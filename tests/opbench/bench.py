"""What benchmarking the ops needs, kept apart from them: their inputs and the math they compute."""

import torch


def make_inputs(shape, gen, device):
    n = shape["n"]
    return {"a": torch.empty(n, device=device).uniform_(-1, 1, generator=gen),
            "b": torch.empty(n, device=device).uniform_(-1, 1, generator=gen)}


def reference(a, b):
    return a + b
