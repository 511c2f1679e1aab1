"""The persisting-L2 carve-out of the current CUDA context, through the driver API (whatever runtime copy
torch uses): read, set and cleared for the state guard (cudabench.measure.state). An access-policy window
one subject sets would keep its data in L2 through the next subject's cold-cache flush."""

from __future__ import annotations

import ctypes
from typing import Optional

CU_LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06  # CUlimit in cuda.h


_DRIVER: list[Optional[ctypes.CDLL]] = []


def driver() -> Optional[ctypes.CDLL]:
    """The CUDA driver library (the persisting-L2 limit is a property of the context, which the
    driver API reaches whatever runtime copy torch uses)."""
    if not _DRIVER:
        try:
            _DRIVER.append(ctypes.CDLL("libcuda.so.1"))
        except OSError:
            _DRIVER.append(None)
    return _DRIVER[0]


def get_limit(driver: ctypes.CDLL) -> int:
    value = ctypes.c_size_t(0)
    if driver.cuCtxGetLimit(ctypes.byref(value), CU_LIMIT_PERSISTING_L2_CACHE_SIZE) != 0:
        return -1  # unreadable (no context, or not supported): compares equal to itself
    return int(value.value)


CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW = 1  # CUstreamAttrID in cuda.h


def clear_stream_window(driver: ctypes.CDLL) -> None:
    """No access-policy window on the current stream (a zero-length window disables it)."""
    import torch

    value = (ctypes.c_char * 64)()  # CUstreamAttrValue: a union of at most 64 bytes, all zero
    handle = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    driver.cuStreamSetAttribute(handle, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, ctypes.byref(value))


def reset_persisting_l2(driver: ctypes.CDLL, limit: int) -> None:
    if limit >= 0:
        driver.cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, ctypes.c_size_t(limit))
    driver.cuCtxResetPersistingL2Cache()  # lines already marked persisting become normal again
