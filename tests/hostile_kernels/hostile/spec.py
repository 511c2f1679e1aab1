"""hostile: y = 2 * x + 1 in float32, forward only, with variants that misbehave on purpose.

A test bed for the harness (not shipped): each variant models one way a custom operator can go
wrong. Load it with `--kernels-dir tests/hostile_kernels`.
"""

import ctypes
import os

import torch

from cudabench.spec import Baseline, Family, Param, Variant, empty_like

# HostileMode in hostile.h
HONEST, SIDE_STREAM, CRASH, HANG, ASSERT, PERSIST_L2 = range(6)


def make_inputs(shape, gen, device):
    return {"x": torch.empty(shape["n"], device=device).uniform_(-1, 1, generator=gen)}


def reference(x):
    return 2 * x + 1


def work(shape, direction):
    n = shape["n"]
    return 2.0 * n, 8.0 * n  # a multiply and an add per element; read x, write y


def bind(mode):
    def make(ext):
        def op(x):
            y = empty_like(x)
            ext.hostile(x, y, mode)
            return y

        return op

    return make


def bind_cached(ext):
    """The first call for an input pointer (and shape) computes honestly and keeps the output;
    later calls with the same pointer hand back that stored tensor and launch nothing."""
    seen = {}

    def op(x):
        key = (x.data_ptr(), tuple(x.shape))
        if key not in seen:
            y = empty_like(x)
            ext.hostile(x, y, HONEST)
            seen[key] = y
        return seen[key]

    return op


def bind_hoard(ext):
    """Computes honestly, and keeps a 64 MiB scratch tensor made at its first call for all later
    calls: a call that allocates nothing new, but needs the memory."""
    scratch = []

    def op(x):
        if not scratch:
            scratch.append(torch.empty(64 << 20, dtype=torch.uint8, device=x.device))
        y = empty_like(x)
        ext.hostile(x, y, HONEST)
        return y

    return op


def bind_exit(ext):
    def op(x):
        os._exit(3)

    return op


def bind_segfault(ext):
    def op(x):
        return ctypes.string_at(0)  # reads address 0: SIGSEGV

    return op


def _v(name, summary, bind_fn):
    return Variant(name, summary, bind_fn, has_backward=False)


FAMILY = Family(
    name="hostile",
    summary="y = 2 * x + 1, float32 — misbehaving variants to test the harness (test bed, not shipped)",
    sources=("hostile.cu", "hostile.cpp"),
    params=(Param("n", 1 << 24, "number of elements"),),
    make_inputs=make_inputs,
    reference=reference,
    variants=(
        _v("hostile-honest", "honest grid-stride kernel on PyTorch's current stream (the reference point)",
           bind(HONEST)),
        _v("hostile-side-stream", "launches on its own non-blocking stream, never joined to PyTorch's current "
           "stream and never synchronized", bind(SIDE_STREAM)),
        _v("hostile-cached", "skips the work when called twice: the same input pointer returns the output "
           "stored by the first call, launching nothing", bind_cached),
        _v("hostile-crash", "writes to an illegal address: sticky 'illegal memory access' error in the CUDA "
           "context", bind(CRASH)),
        _v("hostile-hang", "never terminates: spins on a flag in global memory that nothing sets",
           bind(HANG)),
        _v("hostile-assert", "a device-side assert fails (sticky 'device-side assert triggered')",
           bind(ASSERT)),
        _v("hostile-hoard", "computes honestly, keeps a 64 MiB scratch tensor made at its first call",
           bind_hoard),
        _v("hostile-exit", "the op calls os._exit(3): the worker process dies", bind_exit),
        _v("hostile-segfault", "the op dereferences a null pointer through ctypes: SIGSEGV", bind_segfault),
        _v("hostile-persist-l2", "computes honestly but leaves process-wide state behind: the persisting-L2 "
           "limit raised to the maximum and a persisting access policy window over x, never reset",
           bind(PERSIST_L2)),
    ),
    baselines=(Baseline("torch", "PyTorch 2 * x + 1", lambda: (lambda x: 2 * x + 1), has_backward=False),),
    work=work,
    bound="memory",
    tolerance=1e-6,
)
