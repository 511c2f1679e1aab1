"""Process-wide state a subject could leave behind for the next one in the same worker, and the
guard that notices and undoes it.

Two kinds:
- functions the harness itself depends on for honest figures (a patched `time.perf_counter` or
  `torch.cuda.synchronize` fakes every later figure), cudabench's own, and PyTorch's public
  namespaces that every subject calls into (a replaced `torch.nn.functional.conv1d` or
  `torch.Tensor.__mul__` would slow or change a later subject, a baseline say) — changed ones are
  restored and the subject that changed them is INVALID;
- settings that change how kernels run: TF32 and cuDNN flags, the current stream, grad mode, the
  default dtype, the persisting-L2 carve-out (an access-policy window set by one subject would
  keep its data in L2 through the next subject's cold-cache flush). These are reset before the
  next subject; the subject that changed them gets a note (and under --cold, a persisting-L2
  carve-out invalidates its own cold figure).
"""

from __future__ import annotations

import builtins
import ctypes
import inspect
import json.encoder  # noqa: F401 - this and the next three: owners of HARNESS_FUNCTIONS, found in sys.modules
import sys
import threading  # noqa: F401
import time  # noqa: F401
from dataclasses import dataclass
from typing import Any, Callable

from cudabench.device import nvml_loaded
from cudabench.measure.internals import FunctionInternals, functions_of
from cudabench.measure.persisting_l2 import CU_LIMIT_PERSISTING_L2_CACHE_SIZE, clear_stream_window, get_limit
from cudabench.measure.persisting_l2 import driver as cuda_driver, reset_persisting_l2
from cudabench.measure.process_hooks import ProcessHooks, os_settings
from cudabench.measure.unchanged import Unchanged
from cudabench.measure.watched import WatchedObjects

# What the timers and the check rely on, by dotted name (module, then attributes down to the owner)
HARNESS_FUNCTIONS = (
    "time.perf_counter", "torch.cuda.synchronize", "torch.cuda._sleep", "torch.cuda.Event.record",
    "torch.cuda.Event.elapsed_time", "torch.cuda.Event.synchronize", "torch.cuda.CUDAGraph.replay",
    "torch.autograd.profiler.profile", "torch.autograd.profiler.record_function", "torch.linalg.vector_norm",
    "torch.Tensor.copy_", "torch.Tensor.clone", "torch.Tensor.untyped_storage", "torch.UntypedStorage._share_cuda_",
    "threading.Thread.start", "sys._getframe",
    # the stream the events are recorded on and the calls are made on (Event.record reads the current one)
    "torch.cuda.current_stream", "torch.cuda.set_stream", "torch.cuda.stream", "torch.cuda.Stream", "torch.cuda.Event",
    # the subject process's replies to the judge are written and its requests read with these
    "json.dumps", "json.loads", "json.JSONEncoder.encode", "json.JSONEncoder.iterencode", "json.JSONDecoder.decode",
    "json.JSONDecoder.raw_decode", "json.encoder.c_make_encoder", "json.encoder.encode_basestring_ascii",
)


def _harness_functions() -> dict[str, tuple[Any, str, Any]]:
    """name -> (owner, attribute, current value) of HARNESS_FUNCTIONS."""
    import torch.autograd.profiler  # noqa: F401 - torch and its submodules, loaded to be walked below

    found = {}
    for name in HARNESS_FUNCTIONS:
        path, attr = name.rsplit(".", 1)
        owner = sys.modules[path.split(".")[0]]
        for part in path.split(".")[1:]:
            owner = getattr(owner, part)
        found[name] = (owner, attr, getattr(owner, attr))
    return found


CONSTANTS = (int, float, str, bool, tuple, type(None))

# PyTorch's public namespaces every subject calls into (a baseline's conv1d, the operators of 2 * x + 1):
# one subject replacing an entry would change how a later subject of the same process runs; and NVML's
# (a subject faking throttle reasons would have its slow samples left out as throttled)
def _library_owners() -> dict[str, Any]:
    import torch
    import torch.fft
    import torch.linalg
    import torch.nn.functional

    owners = {"torch": torch, "torch.nn.functional": torch.nn.functional, "torch.fft": torch.fft,
              "torch.linalg": torch.linalg, "torch.Tensor": torch.Tensor}
    base = getattr(torch._C, "TensorBase", None) or getattr(torch._C, "_TensorBase", None)
    if base is not None:
        owners["torch._C.TensorBase"] = base
    try:  # NVML, through which the subject process reads the clocks that decide which samples count
        import pynvml
    except ImportError:
        return owners
    nvml_loaded()  # its first init sets pynvml.nvmlLib: done before the snapshot, so that is no patch
    owners["pynvml"] = pynvml
    return owners


def _library_functions() -> dict[str, tuple[Any, str, Any]]:
    """name -> (owner, attribute, value) of the public entries of those namespaces (and the operators
    of the tensor classes), read from their own dicts: compared by identity."""
    found: dict[str, tuple[Any, str, Any]] = {}
    for owner_name, owner in _library_owners().items():
        is_class = inspect.isclass(owner)
        for name, value in list(vars(owner).items()):
            operator = is_class and name.startswith("__") and name.endswith("__")
            if (name.startswith("_") and not operator) or inspect.ismodule(value):
                continue
            found[f"{owner_name}.{name}"] = (owner, name, value)
    return found


def _torch_own_wrapper(value: Any, original: Any) -> bool:
    """Whether `value` is PyTorch's own wrapper of `original` (torch.compile wraps torch.manual_seed
    the first time it runs): defined in torch, and unwrapping to it."""
    if not str(getattr(value, "__module__", "") or "").startswith("torch"):
        return False
    seen = 0
    while value is not None and seen < 10:
        if value is original:
            return True
        value, seen = getattr(value, "__wrapped__", None), seen + 1
    return False


def _cudabench_modules() -> list[tuple[str, Any]]:
    return [(name, m) for name, m in list(sys.modules.items())
            if m is not None and (name == "cudabench" or name.startswith("cudabench."))]


def _cudabench_attributes() -> dict[str, tuple[Any, str, Any]]:
    """name -> (owner, attribute, value) for every function, class, method and constant of the
    cudabench modules loaded in this process: all a subject could patch to steer the harness from
    inside its own process (its timers, its loop, its poison, its reports). Compared by identity."""
    found: dict[str, tuple[Any, str, Any]] = {}
    for name, module in _cudabench_modules():
        for attr, value in list(vars(module).items()):
            if attr.startswith("__"):
                continue
            # public constants only: a private module global such as a cache is filled lazily
            constant = isinstance(value, CONSTANTS) and attr.isupper() and not attr.startswith("_")
            # a module too: the timers call time.perf_counter through their own global `time`
            if inspect.isfunction(value) or inspect.isclass(value) or inspect.ismodule(value) or constant:
                found[f"{name}.{attr}"] = (module, attr, value)
            if inspect.isclass(value) and getattr(value, "__module__", None) == name:
                for member, v in list(vars(value).items()):  # a special method too (__next__, __bool__, ...)
                    if not member.startswith("__") or functions_of(v):
                        found[f"{name}.{attr}.{member}"] = (value, member, v)
    return found


_MISSING = object()


def _settings(cuda: bool) -> dict[str, tuple[Callable[[], Any], Callable[[Any], None]]]:
    """name -> (read, write) of the settings that change how kernels run."""
    import torch

    b = torch.backends
    found = {
        "torch.backends.cuda.matmul.allow_tf32": (lambda: b.cuda.matmul.allow_tf32,
                                                  lambda v: setattr(b.cuda.matmul, "allow_tf32", v)),
        "torch.backends.cudnn.allow_tf32": (lambda: b.cudnn.allow_tf32, lambda v: setattr(b.cudnn, "allow_tf32", v)),
        "torch.backends.cudnn.benchmark": (lambda: b.cudnn.benchmark, lambda v: setattr(b.cudnn, "benchmark", v)),
        "torch.backends.cudnn.deterministic": (lambda: b.cudnn.deterministic,
                                               lambda v: setattr(b.cudnn, "deterministic", v)),
        "float32 matmul precision": (torch.get_float32_matmul_precision, torch.set_float32_matmul_precision),
        "default dtype": (torch.get_default_dtype, torch.set_default_dtype),
        "grad mode": (torch.is_grad_enabled, torch.set_grad_enabled),
    }
    if cuda:
        found["current stream"] = (torch.cuda.current_stream, torch.cuda.set_stream)
        lib = cuda_driver()
        if lib is not None:
            found["persisting-L2 limit"] = (lambda: get_limit(lib), lambda v: reset_persisting_l2(lib, v))
    return found


@dataclass(frozen=True)
class Leftover:
    patched: tuple[str, ...]      # harness functions and process hooks that were replaced (restored now)
    changed: tuple[str, ...]      # settings that were changed (reset now), "name: before -> after"
    lasting: tuple[str, ...] = ()  # hooks and settings that could not be put back: the process must go

    def __bool__(self) -> bool:
        return bool(self.patched or self.changed or self.lasting)

    def describe(self) -> str:
        parts = []
        if self.patched:
            parts.append("replaced " + ", ".join(self.patched))
        if self.changed:
            parts.append("changed " + ", ".join(self.changed))
        if self.lasting:
            parts.append("left for good " + ", ".join(self.lasting))
        return "; ".join(parts)


class StateGuard:
    """Remembers the pristine state once (at worker start, after the harness set TF32 off) and,
    after each subject, restores whatever differs, saying what it was."""

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda
        self.functions = _harness_functions()
        self.members = _cudabench_attributes()  # snapshot once the harness's modules are loaded
        self.library = _library_functions()
        self.owners = _library_owners()
        self.unchanged = self._snapshot()
        self.internals = self._internals()  # what each watched function runs: code, defaults, closure
        self.settings = {**_settings(cuda), **os_settings()}
        self.hooks = ProcessHooks()      # signal handlers and timers, gc callbacks, import hooks, ...
        self.pristine = {name: read() for name, (read, _) in self.settings.items()}
        self._cleared = False            # the persisting-L2 limit was set to 0 for this subject
        self.persisting_set = 0          # the largest limit the subject set while it was held at 0
        self.objects = WatchedObjects()  # the harness's long-lived objects, added as they are made

    def clear_persisting_l2(self) -> None:
        """Before each cold-timed call: the persisting-L2 limit to 0 (whatever set it: the subject,
        or a set-aside the device had before any subject ran), every persisting line made normal,
        and the current stream's access-policy window cleared. With no set-aside no line can persist,
        whatever window a launch asks for. A limit found raised again after it was cleared was raised
        by the subject."""
        lib = cuda_driver() if self.cuda else None
        if lib is None:
            return
        limit = get_limit(lib)
        if limit > 0:
            if self._cleared:
                self.persisting_set = max(self.persisting_set, limit)
            lib.cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, ctypes.c_size_t(0))
        self._cleared = True
        lib.cuCtxResetPersistingL2Cache()
        clear_stream_window(lib)

    def _snapshot(self) -> Unchanged:
        """What `restore` compares first: every watched entry; the names of the tensor classes and of
        every class a cudabench module defines; every name and value of the cudabench modules (an
        entry added to one, or a value of another type, is found by the full walk)."""
        modules = _cudabench_modules()
        classes = [v for name, m in modules for v in vars(m).values()
                   if inspect.isclass(v) and getattr(v, "__module__", None) == name]
        namespaces = [o for o in self.owners.values() if inspect.isclass(o)] + classes
        return Unchanged([*self.members.values(), *self.library.values()], namespaces,
                         [builtins, *(m for _, m in modules)])  # builtins: what every module falls back to

    def _internals(self) -> FunctionInternals:
        tables = (self.functions, self.members, self.library)
        return FunctionInternals((name, value) for table in tables for name, (_, _, value) in table.items())

    def restore(self) -> Leftover:
        same = self.unchanged.holds() and all(getattr(owner, attr) is original
                                               for owner, attr, original in self.functions.values())
        patched = [] if same else self._walk()
        patched += self.internals.restore()
        if not same:  # the walk took modules imported since: their functions are watched from now on
            self.internals = self._internals()
        patched += self.objects.restore()
        hooks, lasting, changed = self.hooks.restore()
        patched += hooks
        for name, (read, write) in self.settings.items():
            now = read()
            if now != self.pristine[name]:
                if not (self._cleared and name == "persisting-L2 limit" and now == 0):  # cold timing's own 0
                    changed.append(f"{name}: {_show(self.pristine[name])} -> {_show(now)}")
                try:
                    write(self.pristine[name])
                except (OSError, ValueError):  # a limit or priority this process may not restore
                    lasting.append(name)
        if self.persisting_set:
            changed.append(f"persisting-L2 limit: raised to {_show(self.persisting_set)} during cold timing")
        self._cleared, self.persisting_set = False, 0
        return Leftover(tuple(patched), tuple(changed), tuple(lasting))

    def _walk(self) -> list[str]:
        """The full walk: every function, member and namespace entry that differs, put back and named;
        then a new snapshot."""
        patched = []
        for name, (owner, attr, original) in self.functions.items():
            if getattr(owner, attr) is not original:
                setattr(owner, attr, original)
                patched.append(name)
        for name, (owner, attr, original) in self.members.items():
            if vars(owner).get(attr, _MISSING) is not original:
                setattr(owner, attr, original)
                patched.append(name)
        for module, names, values in self.unchanged.modules:  # any other value of a harness module too: a
            now = vars(module)                                 # cache, a reader bound at import (process_hooks)
            for attr, value in zip(names, values):
                if not attr.startswith("__") and now.get(attr, _MISSING) is not value:
                    setattr(module, attr, value)
                    patched.append(f"{module.__name__}.{attr}")
            known = set(names)  # a name added shadows a builtin (`float`), unless it is a submodule imported since
            for attr in [a for a in now if a not in known and not a.startswith("__")]:
                if sys.modules.get(f"{module.__name__}.{attr}") is not now[attr]:
                    delattr(module, attr)
                    patched.append(f"{module.__name__}.{attr}")
        for name, (owner, attr, original) in list(self.library.items()):
            now = vars(owner).get(attr, _MISSING)
            if now is original:
                continue
            if _torch_own_wrapper(now, original):
                self.library[name] = (owner, attr, now)  # PyTorch's own doing: taken as it is
                continue
            setattr(owner, attr, original)
            patched.append(name)
        for owner_name, owner in self.owners.items():  # an entry added to a tensor class shadows
            if not inspect.isclass(owner):             # what its base defines (__rmul__, say)
                continue
            for attr in [a for a in vars(owner) if f"{owner_name}.{a}" not in self.library]:
                if not attr.startswith("_") or attr.startswith("__"):
                    delattr(owner, attr)
                    patched.append(f"{owner_name}.{attr}")
        owners = {id(o) for o, _, _ in self.members.values()}
        for name, (owner, attr, value) in _cudabench_attributes().items():
            if name in self.members:
                continue
            if id(owner) in owners and inspect.isclass(owner):  # a member added to a harness class
                delattr(owner, attr)
                patched.append(name)
            else:  # a module imported since the snapshot: taken as it is
                self.members[name] = (owner, attr, value)
        self.unchanged = self._snapshot()
        return patched


def _show(value: Any) -> str:
    return f"{value / 2**20:.0f} MiB" if isinstance(value, int) and not isinstance(value, bool) and value > 4096 \
        else str(value)
