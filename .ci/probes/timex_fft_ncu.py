"""Run timex-fft forward and backward once per shape for Nsight Compute (.ci/gpu fft_ncu):
the seed shape, B=8 T=1024, B=8 T=4096 and B=2 T=16384, float32."""
import torch

from cudabench.spec.build import build
from cudabench.spec.registry import discover

family = discover().family("timex")
op = family.variant("timex-fft").bind(build(family).module)
gen = torch.Generator(device="cuda").manual_seed(0)
for shape in ({"B": 32, "C": 768, "T": 768}, {"B": 8, "C": 768, "T": 1024}, {"B": 8, "C": 768, "T": 4096}, {"B": 2, "C": 768, "T": 16384}):
    inputs = family.make_inputs(shape, gen, "cuda")
    w, k = inputs["w"].requires_grad_(), inputs["k"].requires_grad_()
    out = op(w, k, inputs["eps"])
    out.backward(torch.ones_like(out))
    torch.cuda.synchronize()
