"""Turning an op and its inputs into the call that is timed, for each direction:
fwd = op(**inputs); bwd = gradients of a stored forward; fwdbwd = forward then gradients."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional

import torch


@dataclass(frozen=True)
class Workload:
    """`call` is what the timers run: one call, returning its named outputs (out, and g<input>
    gradients). The call that is timed and the call that is judged are the same function."""

    call: Callable[[], dict[str, Any]]
    # bwd only: makes the stored forward again from the current input values (a graph timer captures it
    # in a graph of its own and replays it before a judged call: see timers.GraphTimer)
    forward: Optional[Callable[[], None]] = None

    @property
    def results(self) -> Callable[[], dict[str, Any]]:
        return self.call


def grad_name(input_name: str) -> str:
    return f"g{input_name}"


def _leaves(inputs: Mapping[str, Any], grad_inputs: tuple[str, ...]) -> dict[str, Any]:
    """Copies of the inputs as autograd leaves (the originals stay untouched for other subjects)."""
    return {name: (value.detach().requires_grad_(True) if name in grad_inputs else value)
            for name, value in inputs.items()}


def make_workload(op: Callable[..., Any], inputs: Mapping[str, Any], direction: str,
                  grad_inputs: tuple[str, ...] = (), grad_out: Any = None) -> Workload:
    if direction == "fwd":
        plain = {k: (v.detach() if torch.is_tensor(v) else v) for k, v in inputs.items()}
        return Workload(call=lambda: {"out": op(**plain)})
    if not grad_inputs or grad_out is None:
        raise ValueError(f"direction {direction} needs gradient inputs and an upstream gradient")

    def gradients(out, leaves):
        wrt = [leaves[name] for name in grad_inputs]
        grads = torch.autograd.grad(out, wrt, grad_out, retain_graph=(direction == "bwd"))
        return {grad_name(n): g for n, g in zip(grad_inputs, grads)}

    if direction == "fwdbwd":
        leaves = _leaves(inputs, grad_inputs)

        def results():
            out = op(**leaves)
            return {"out": out, **gradients(out, leaves)}

        return Workload(call=results)
    if direction == "bwd":
        def forward():
            # leaves of its own: autograd ties a leaf to the stream of the forward that first used it, and a
            # backward captured in a graph must not wait on a stream outside the capture
            leaves = _leaves(inputs, grad_inputs)
            stored[0] = (op(**leaves), leaves)

        stored: list = [None]
        forward()  # the forward whose backward is timed
        return Workload(call=lambda: gradients(*stored[0]), forward=forward)
    raise ValueError(f"unknown direction {direction!r}")
