"""Building kernel families: a cached JIT build through torch.utils.cpp_extension (ninja), and a
compile-only check with nvcc (and the host compiler for the binding) that needs no GPU."""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import os
import re
import shutil
import subprocess
import sys
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from cudabench.errors import BuildError, NoGPUError, ShapeError
from cudabench import tools
from cudabench.spec.family import Family

INCLUDE_DIR = Path(__file__).resolve().parent / "include"
SOURCE_SUFFIXES = {".cu", ".cpp", ".h", ".cuh", ".hpp"}
# No -std here: torch.utils.cpp_extension picks the standard its headers need (C++20 from torch
# 2.10); overriding it compiles the binding against a different ABI and crashes on exceptions.
CUDA_FLAGS = ("-O3", "-lineinfo")
# torch's JIT build adds these to every nvcc call; a compile-only check must see the same.
TORCH_NVCC_DEFINES = ("-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
                      "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__")
CXX_FLAGS = ("-O3",)
BINDING_STD = "-std=c++20"
# Each library calls its own functions (the binding's call into the launcher, say), never a library
# of the same names a process loaded before it: without this, an edited launcher in a warm process
# would be bound to the old library's copy
LD_FLAGS = ("-Wl,-Bsymbolic",)


@dataclass(frozen=True)
class BuildResult:
    family: str
    module: Any
    seconds: float
    cache_hit: bool
    directory: Path
    arch: str


def normalize_arch(arch: str) -> str:
    """'sm_90', '90', '9.0', 'sm_90a' -> 'sm_90' / 'sm_90a'."""
    a = arch.strip().lower().removeprefix("sm_").removeprefix("compute_")
    m = re.fullmatch(r"(\d+)\.?(\d)(a?)", a)
    if not m:
        raise ShapeError(f"Cannot read the GPU architecture '{arch}'.", "Write it like sm_90, sm_90a or 9.0.")
    return f"sm_{m.group(1)}{m.group(2)}{m.group(3)}"


def torch_arch_list(arch: str) -> str:
    """sm_90 -> '9.0', sm_90a -> '9.0a' (the TORCH_CUDA_ARCH_LIST spelling)."""
    digits = arch.removeprefix("sm_")
    suffix = "a" if digits.endswith("a") else ""
    digits = digits.rstrip("a")
    return f"{digits[:-1]}.{digits[-1]}{suffix}"


def with_features(family: Family, arch: str) -> str:
    """The arch-specific target the family asks for in place of `arch` (sm_90 -> sm_90a for a family
    with Hopper-only instructions: wgmma, setmaxnreg); else `arch`. Code built for sm_90a runs only on
    sm_90 devices, which is what a build for sm_90 is for."""
    for feature in family.feature_archs:
        if normalize_arch(feature).rstrip("a") == arch:
            return normalize_arch(feature)
    return arch


def gencode(arch: str) -> str:
    n = arch.removeprefix("sm_")
    return f"-gencode=arch=compute_{n},code=sm_{n}"


def device_arch() -> str:
    import torch

    if not torch.cuda.is_available():
        raise NoGPUError("No CUDA device to build for.", "Name the target with --arch (e.g. --arch sm_90).")
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"


def hashed_files(family: Family) -> list[Path]:
    own = sorted(p for p in family.folder.iterdir() if p.suffix in SOURCE_SUFFIXES)
    return own + sorted(p for p in INCLUDE_DIR.rglob("*") if p.suffix in (".h", ".cuh", ".inc"))


def build_key(family: Family, arch: str, flags: tuple[str, ...]) -> str:
    """Hash of every source and header, the flags, the arch and the torch/CUDA/Python versions."""
    import torch

    h = hashlib.sha256()
    for path in hashed_files(family):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    for part in (*flags, arch, torch.__version__, str(torch.version.cuda), sys.version):
        h.update(part.encode())
    return h.hexdigest()[:16]


def cache_root() -> Path:
    env = os.environ.get("CUDABENCH_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "cudabench"


# ---- JIT build ----------------------------------------------------------------------------------

@contextlib.contextmanager
def _env(**values: str) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def cuda_home_for_torch(cpp_extension: Any) -> Iterator[Optional[str]]:
    """Build with the toolkit of the nvcc cudabench finds, unless the user set CUDA_HOME/CUDA_PATH.
    torch's own guess is the folder above `which nvcc`: wrong when nvcc is a wrapper script (e.g.
    /usr/local/bin/nvcc exec'ing /opt/cuda-12.4/bin/nvcc), where it then misses cuda_runtime.h.
    torch.utils.cpp_extension copies CUDA_HOME into a module global when first imported, and
    load() reads only that global, so setting the environment variable now would come too late:
    set the global for the build (the variable too, for anything the build starts)."""
    if tools.user_cuda_home():
        yield None
        return
    home = tools.cuda_home_of(tools.find_nvcc().path)
    saved = cpp_extension.CUDA_HOME
    cpp_extension.CUDA_HOME = home
    try:
        with _env(CUDA_HOME=home):
            yield home
    finally:
        cpp_extension.CUDA_HOME = saved


def folder_key(family: Family, arch: str, flags: tuple[str, ...]) -> str:
    """What a build folder is for: the family's folder, the flags, the arch and the torch/CUDA/Python
    versions, not the sources' content. An edit builds in the same folder, where ninja recompiles
    only what the edit reaches (its depfiles list each object's headers)."""
    import torch

    h = hashlib.sha256()
    for part in (str(family.folder.resolve()), *flags, arch, torch.__version__, str(torch.version.cuda),
                 sys.version):
        h.update(part.encode())
    return h.hexdigest()[:16]


PYTHON_API_VERSION = 1013  # the C API's PYTHON_API_VERSION, unchanged since Python 2.4
KEEP_LOADED = 8  # content-named libraries kept per build folder
_LOADED: dict[Path, Any] = {}  # loaded library -> its module, once per process
# told of each module as it is made (the state guard of each subject runner in this process), held weakly:
# a runner that is gone is forgotten, not kept alive with its guard's snapshot (100 runners: 1M objects)
ON_LOAD: list[weakref.WeakMethod] = []


def on_load(method: Callable[[dict, Path, Any], None]) -> None:
    """Tell the bound `method` of each module made from now on, for as long as its object lives."""
    ON_LOAD.append(weakref.WeakMethod(method))


def tell_loaded(loaded: dict, path: Path, made: Any) -> None:
    """A module just made and put in `loaded[path]`, told to every living watcher."""
    for ref in list(ON_LOAD):
        tell = ref()
        if tell is None:
            ON_LOAD.remove(ref)
        else:
            tell(loaded, path, made)


def build(family: Family, arch: Optional[str] = None, verbose: bool = False) -> BuildResult:
    """Build (or load from the cache) the family's extension for `arch` (default: this GPU's).

    One stable build folder per family, arch and flags, so an edit recompiles only the translation
    units it reaches. What is loaded is a copy of the library named by the sources' content hash:
    the code that runs is the code of the sources as they are now, never an older library a process
    already loaded under the same path. A lock keeps two invocations from building one folder at once."""
    if not family.sources:  # an op named by import path (spec.op_family): nothing to build
        return BuildResult(family.name, None, 0.0, True, family.folder, "host")
    import torch

    has_cuda = any(p.suffix == ".cu" for p in family.source_paths())
    if torch.version.cuda is None and has_cuda:
        raise NoGPUError(
            f"This torch ({torch.__version__}) is a CPU build: it cannot build CUDA extensions.",
            "`cudabench build --check` compiles the sources with nvcc alone.")
    arch = normalize_arch(arch) if arch else (device_arch() if has_cuda else "host")
    arch = with_features(family, arch)
    flags = CUDA_FLAGS + family.extra_cuda_cflags
    name = f"cb_{family.name.replace('-', '_')}_{folder_key(family, arch, flags)}"
    directory = cache_root() / "build" / name
    loaded = directory / "loaded" / f"{name}.{build_key(family, arch, flags)}.so"
    start = time.perf_counter()
    cache_hit = loaded.is_file()
    if not cache_hit:
        with _folder_lock(directory):
            cache_hit = loaded.is_file()  # another invocation built it while this one waited
            if not cache_hit:
                _compile(family, arch, flags, name, directory, verbose, has_cuda)
                _publish(directory / f"{name}.so", loaded)
    return BuildResult(family.name, _load(name, loaded), time.perf_counter() - start, cache_hit, directory, arch)


@contextlib.contextmanager
def _folder_lock(directory: Path) -> Iterator[None]:
    import fcntl

    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _compile(family: Family, arch: str, flags: tuple[str, ...], name: str, directory: Path, verbose: bool,
             has_cuda: bool) -> None:
    """torch's own ninja file and build, without its import: torch.utils.cpp_extension.load would
    import the library from its build path (stale in a process that loaded it before) and, for a
    second build of one name in a process, rename it, which changes every command and rebuilds all."""
    from torch.utils import cpp_extension

    wanted = dict(name=name, sources=[str(p) for p in family.source_paths()], extra_cflags=list(CXX_FLAGS),
                  extra_cuda_cflags=list(flags), extra_sycl_cflags=None, extra_ldflags=list(LD_FLAGS),
                  extra_include_paths=[str(INCLUDE_DIR), str(family.folder)], build_directory=str(directory),
                  verbose=verbose, with_cuda=has_cuda, with_sycl=False, is_standalone=False)
    builder = cpp_extension._write_ninja_file_and_build_library
    accepted = inspect.signature(builder).parameters
    try:
        with _env(TORCH_CUDA_ARCH_LIST=torch_arch_list(arch) if has_cuda else os.environ.get(
                "TORCH_CUDA_ARCH_LIST", "")), cuda_home_for_torch(cpp_extension) if has_cuda else contextlib.nullcontext():
            builder(**{k: v for k, v in wanted.items() if k in accepted})
    except (RuntimeError, subprocess.CalledProcessError, OSError) as exc:
        raise BuildError(f"Building {family.name} for {arch} failed:\n{compiler_errors(str(exc))}",
                         f"Full log: rerun with `cudabench build --kernel {family.name} --verbose`.") from None


def _publish(built: Path, loaded: Path) -> None:
    """The library under its content name, written whole before it appears."""
    loaded.parent.mkdir(parents=True, exist_ok=True)
    partial = loaded.with_name(loaded.name + f".{os.getpid()}.partial")
    shutil.copyfile(built, partial)
    os.replace(partial, loaded)
    # the newest few stay (a process may still map an older one: Linux keeps it until unmapped)
    for old in sorted(loaded.parent.glob("*.so"), key=lambda p: p.stat().st_mtime, reverse=True)[KEEP_LOADED:]:
        old.unlink(missing_ok=True)


def _load(name: str, path: Path) -> Any:
    """The module in `path`, made once per process. Every library of a folder has the folder's module
    name, and Python's import hands back the module it first made under a name, whatever the file: so
    the module is made here from the library's own init function (one-phase or multi-phase)."""
    if path not in _LOADED:
        import ctypes
        import importlib.util
        import types

        try:
            init = getattr(ctypes.PyDLL(str(path), mode=ctypes.RTLD_LOCAL), f"PyInit_{name}")
        except (OSError, AttributeError) as exc:
            raise BuildError(f"{path} cannot be loaded as a Python extension: {exc}.",
                             "Delete it and build again.") from None
        init.restype, init.argtypes = ctypes.c_void_p, []
        made = ctypes.cast(init(), ctypes.py_object).value
        if not isinstance(made, types.ModuleType):  # a module definition (multi-phase init)
            api = ctypes.pythonapi
            api.PyModule_FromDefAndSpec2.restype = ctypes.py_object
            api.PyModule_FromDefAndSpec2.argtypes = [ctypes.py_object, ctypes.py_object, ctypes.c_int]
            api.PyModule_ExecDef.restype, api.PyModule_ExecDef.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.py_object]
            # named after the file, not the folder: pybind11 (3.x) hands back the module it first made
            # under a spec's name, whatever library it came from
            spec = importlib.util.spec_from_file_location(path.name.removesuffix(".so").replace(".", "_"), path)
            made = api.PyModule_FromDefAndSpec2(made, spec, PYTHON_API_VERSION)
            made.__spec__, made.__file__, made.__loader__ = spec, str(path), spec.loader  # as importlib sets them
            if api.PyModule_ExecDef(made, ctypes.cast(init(), ctypes.py_object).value) != 0:
                raise BuildError(f"{path} failed to initialise.", "Delete it and build again.")
        _LOADED[path] = made
        tell_loaded(_LOADED, path, made)
    return _LOADED[path]


_ERROR_LINE = re.compile(r"(error|Error|fatal)\b")
_LOCATION = re.compile(r"^(\S+?)(?:\((\d+)\)|:(\d+):(?:\d+:)?)")


def compiler_errors(log: str, limit: int = 8) -> str:
    """The compiler's first error lines (file:line: message), shortest useful excerpt of a log."""
    lines = [ln.rstrip() for ln in log.splitlines()]
    picked = [ln for ln in lines if _ERROR_LINE.search(ln) and _LOCATION.match(ln.strip())]
    if not picked:
        picked = [ln for ln in lines if _ERROR_LINE.search(ln)]
    if not picked:
        picked = [ln for ln in lines if ln.strip()][-limit:]
    out = []
    for ln in picked[:limit]:
        m = _LOCATION.match(ln.strip())
        if m and m.group(2):  # nvcc writes file(line): error ... -> file:line: error ...
            ln = f"{m.group(1)}:{m.group(2)}{ln.strip()[m.end():]}"
        out.append("  " + ln.strip())
    return "\n".join(out)
