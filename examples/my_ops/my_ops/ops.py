"""The op under test: a tanh-approximated GELU written with torch operations (your own extension's
function would go here). cudabench imports this module only in the subject process."""

import math

import torch


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))
