"""Poisoning the memory a call's outputs will land in, so an element the kernel never writes cannot
pass by luck.

Outputs come from PyTorch's caching allocator, which hands a freed block of the right size to the
next request for it. So before a judged call the subject process allocates tensors of the outputs'
sizes, fills them and frees them: the binding's `empty_like` then most likely gets that memory back.
Before the first check the fill is NaN (an unwritten element fails the check); before the later
calls it is fresh random values (an unwritten or uninitialised element differs from one call to the
next, which the determinism check sees). The same is done before every judged call, so it tells the
subject nothing about which calls are checked; the hot timing loop is left alone."""

from __future__ import annotations

from typing import Any, Sequence

import torch

FILL_RANGE = 1e4   # random fills lie in ±FILL_RANGE: wrong by far more than any tolerance


def poison(specs: Sequence[tuple[Sequence[int], str]], device: Any, nan: bool, gen: Any = None,
           copies: int = 1) -> None:
    """Allocate, fill and free `copies` tensors per (shape, dtype name) of the coming call's outputs.
    PyTorch's caching allocator hands the freed blocks of that size back to the next requests for it:
    the output's, and any scratch of the same size (the judged calls poison several); the host's
    malloc is less predictable, so the in-process check poisons several there too."""
    blocks = []
    for shape, dtype in specs:
        for _ in range(copies):
            block = torch.empty(tuple(shape), dtype=getattr(torch, dtype), device=device)
            if not block.is_floating_point():
                continue
            if nan:
                block.fill_(float("nan"))
            else:
                block.uniform_(-FILL_RANGE, FILL_RANGE, generator=gen)
            blocks.append(block)
    del blocks  # freed on the current stream: the next allocations of these sizes get them back
