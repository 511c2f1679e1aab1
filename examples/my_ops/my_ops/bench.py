"""What benchmarking the op needs, kept apart from it (cudabench's judge imports this module, never
my_ops.ops): its inputs and the math it computes."""

import math

import torch


def make_inputs(shape, gen, device):
    return {"x": torch.empty(shape["n"], device=device).uniform_(-4, 4, generator=gen)}


def reference(x):  # called on float64 copies
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def torch_gelu(x):
    """The baseline: PyTorch's own fused GELU, tanh approximation."""
    return torch.nn.functional.gelu(x, approximate="tanh")
