"""NVTX ranges in a `cudabench` domain so an Nsight timeline reads like the run.

Off by default: `range()` then returns a shared no-op context manager and costs a function call.
Backends: the `nvtx` package (domain `cudabench`, categories and colours) or torch.cuda.nvtx
(default domain, text prefixed `cudabench:`), for profilers that do not record the former."""

from __future__ import annotations

import contextlib
from typing import ContextManager

DOMAIN = "cudabench"
CALL_SUFFIX = " call"  # the range around each profiled call is named '<subject> call'
COLORS = {  # category -> colour in the timeline
    "build": "grey",
    "check": "purple",
    "warmup": "yellow",
    "case": "blue",
    "timed": "green",
    "iteration": "darkgreen",
    "baseline": "orange",
}

_NULL = contextlib.nullcontext()
_state = {"enabled": False, "backend": "nvtx", "iterations": False}


def configure(enabled: bool, backend: str = "nvtx", iterations: bool = False) -> None:
    """Turn ranges on or off; `iterations` adds one range per timed call (costs a little)."""
    if enabled and backend == "nvtx":
        try:
            import nvtx  # noqa: F401
        except ImportError:
            backend = "torch"
    _state.update(enabled=enabled, backend=backend, iterations=iterations)


def backend() -> str:
    return _state["backend"]


def around(call, message: str):
    """`call` wrapped in a per-call range (only when per-iteration ranges are on)."""
    if not iterations_enabled():
        return call

    def ranged():
        with range(message, "iteration"):
            return call()

    return ranged


def iterations_enabled() -> bool:
    return _state["enabled"] and _state["iterations"]


def range(message: str, category: str = "case") -> ContextManager:  # noqa: A001 - mirrors nvtx
    if not _state["enabled"]:
        return _NULL
    if _state["backend"] == "torch":
        return _torch_range(f"{DOMAIN}:{message}")
    import nvtx

    return nvtx.annotate(message, color=COLORS.get(category, "blue"), domain=DOMAIN, category=category)


@contextlib.contextmanager
def _torch_range(message: str):
    import torch

    torch.cuda.nvtx.range_push(message)
    try:
        yield
    finally:
        torch.cuda.nvtx.range_pop()
