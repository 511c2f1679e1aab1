"""Peak GPU memory of one call: the most bytes PyTorch's caching allocator had handed out during the
call beyond what was allocated before the subject's first call (its inputs and the reference are
allocated by then). So it counts the call's outputs, gradients, scratch tensors and what autograd
saves, and also what the subject keeps between calls (a scratch buffer cached at its first call):
memory it needs, whether it allocates it every call or hoards it.

How allocator caching is handled: `max_memory_allocated` counts bytes in live tensors, not the
pool the allocator reserves, so blocks cached between calls neither add to the figure nor hide
from it; its peak is reset right before the measured call, which runs warm (after the check's
call). Memory taken outside PyTorch's allocator (an extension's own cudaMalloc, a library's
handles) is not seen."""

from __future__ import annotations

from typing import Any, Callable, Optional


def allocated_bytes() -> int:
    import torch

    return int(torch.cuda.memory_allocated())


def peak_memory(call: Callable[[], Any], sync: Callable[[], None], since: int) -> int:
    """Bytes allocated at the peak of one `call`, beyond the `since` allocated before the subject ran."""
    import torch

    sync()
    torch.cuda.reset_peak_memory_stats()
    out = call()
    sync()
    peak = torch.cuda.max_memory_allocated() - since
    del out
    return max(0, int(peak))


# Cached-but-free bytes above which a process hands them back between subjects. Below it, the next
# subject reuses them (cudaMalloc and cudaFree synchronise): the large peaks go, small subjects pay nothing.
RELEASE_ABOVE = 1 << 30


def release_cached(collect: bool = True, ipc: Optional[bool] = None) -> None:
    """Hand the blocks PyTorch's allocator keeps cached back to the device when they pass
    RELEASE_ABOVE; with `collect`, first collect the garbage that still holds some, and with `ipc`
    (by default as `collect`) the IPC blocks another process stopped mapping (the subject process: its heap is set aside at start, so
    that is quick; the judge's is not, and its tensors go by reference counting). Between subjects,
    in each process: a warm process would otherwise sit on the largest subject's peak (8 GiB of eager
    attention's scores), and several on one GPU (warm workers, a Dask worker's) left a later subject
    out of memory (4×H100, 2026-11-26)."""
    import gc

    import torch

    if collect:
        gc.collect()
    if collect if ipc is None else ipc:
        torch.cuda.ipc_collect()
    if torch.cuda.memory_reserved() - torch.cuda.memory_allocated() > RELEASE_ABOVE:
        torch.cuda.empty_cache()
