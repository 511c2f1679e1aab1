"""Tensors between the subject process and the judge, as plain JSON.

A CUDA tensor travels as a CUDA IPC handle of its allocation (torch's own `_share_cuda_`): the judge
maps the subject's memory and reads (outputs) or writes (fresh inputs) it in place, without a copy
through the host. The description is plain data the judge validates: no pickle, so nothing the
subject process sends can run code in the judge. What the judge keeps it first clones into its own
memory, so a later write by the subject cannot change it.

A CPU tensor (the CPU tests, where the subject runs in the judge's process) travels as a key into a
table of this process: the same object on both sides."""

from __future__ import annotations

import base64
import itertools
from typing import Any

import torch

_INLINE: dict[str, torch.Tensor] = {}
_KEYS = itertools.count()
DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16,
          "float16": torch.float16, "int32": torch.int32, "int64": torch.int64, "uint8": torch.uint8,
          "bool": torch.bool, "int8": torch.int8, "int16": torch.int16}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}


class TransportError(Exception):
    """A tensor description that cannot be a tensor the subject made (garbled, out of bounds)."""


def describe(t: Any) -> dict[str, Any]:
    """What a value is, as the judge's output checks read it: a plain dense tensor or not."""
    if not isinstance(t, torch.Tensor):
        return {"kind": type(t).__name__}
    return {"kind": "tensor" if type(t) is torch.Tensor else f"tensor subclass {type(t).__name__}",
            "dtype": DTYPE_NAMES.get(t.dtype, str(t.dtype)), "shape": list(t.shape), "stride": list(t.stride()),
            "layout": str(t.layout), "device": t.device.type}


def share(t: torch.Tensor) -> dict[str, Any]:
    """A description of `t` that `open_shared` turns back into a tensor over the same memory."""
    meta = describe(t)
    if meta["kind"] != "tensor" or t.layout != torch.strided:
        raise TransportError(f"not a plain dense tensor ({meta['kind']}, {meta.get('layout', '')})")
    meta.update(offset=int(t.storage_offset()))
    if t.device.type != "cuda":
        key = f"inline-{next(_KEYS)}"
        _INLINE[key] = t
        meta["inline"] = key
        return meta
    storage = t.untyped_storage()
    (device, handle, size_bytes, offset_bytes, ref_handle, ref_offset, event_handle,
     event_sync) = storage._share_cuda_()
    meta.update(ipc={"device": int(device), "handle": _b64(handle), "size_bytes": int(size_bytes),
                     "offset_bytes": int(offset_bytes), "ref_handle": _b64(ref_handle),
                     "ref_offset": int(ref_offset), "event_handle": _b64(event_handle),
                     "event_sync": bool(event_sync)})
    return meta


def share_outputs(values: dict) -> dict:
    """What the judge sees of a call's outputs: a shared description of each plain tensor, or what it
    is instead (a subclass, a Python number, ...)."""
    shared = {}
    for name, value in values.items():
        meta = describe(value)
        if meta["kind"] == "tensor" and value.layout == torch.strided:
            meta = share(value.detach())
        shared[name] = meta
    return shared


def open_shared(meta: dict[str, Any]) -> torch.Tensor:
    """The tensor a `share` description names (the subject's memory, not a copy)."""
    try:
        dtype = DTYPES[meta["dtype"]]
        shape, stride, offset = [int(v) for v in meta["shape"]], [int(v) for v in meta["stride"]], int(meta["offset"])
        if "inline" in meta:
            # a tensor object of its own over the same memory, as a CUDA IPC mapping is: writing
            # through it leaves the subject's tensor's version counter as it was
            shared = _INLINE[meta["inline"]]
            t = torch.empty(0, dtype=dtype).set_(shared.untyped_storage(), offset, shape, stride)
        else:
            ipc = meta["ipc"]
            storage = torch.UntypedStorage._new_shared_cuda(
                ipc["device"], _unb64(ipc["handle"]), ipc["size_bytes"], ipc["offset_bytes"],
                _unb64(ipc["ref_handle"]), ipc["ref_offset"], _unb64(ipc["event_handle"]), ipc["event_sync"])
            t = torch.empty(0, dtype=dtype, device=f"cuda:{torch.cuda.current_device()}")
            _check_bounds(shape, stride, offset, dtype, storage.nbytes())
            t.set_(storage, offset, shape, stride)
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        raise TransportError(f"an unreadable tensor description: {exc}") from None
    if list(t.shape) != shape or list(t.stride()) != stride or t.dtype != dtype:
        raise TransportError("a tensor description that does not match its tensor")
    return t


def _check_bounds(shape: list[int], stride: list[int], offset: int, dtype: torch.dtype, nbytes: int) -> None:
    if any(s < 0 for s in shape) or any(s < 0 for s in stride) or offset < 0 or len(shape) != len(stride):
        raise ValueError("negative sizes or strides")
    last = offset + sum((n - 1) * s for n, s in zip(shape, stride)) if all(shape) else -1
    if (last + 1) * dtype.itemsize > nbytes:
        raise ValueError(f"the tensor reaches past its memory ({(last + 1) * dtype.itemsize} > {nbytes} bytes)")


def _b64(data: Any) -> str:
    return base64.b64encode(bytes(data or b"")).decode()


def _unb64(text: str) -> bytes:
    return base64.b64decode(text.encode(), validate=True)


def forget_inline() -> None:
    """Drop descriptions never opened (a subject that failed between share and open)."""
    _INLINE.clear()
