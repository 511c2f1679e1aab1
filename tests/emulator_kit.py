"""What the CUDA-emulator tests share (tests/test_emulated_*.py, the kit in tests/emulated): the launch
rewriter, the C++ compiler, running a binary. Their thread pool is the `pool` fixture (tests/conftest.py)."""

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

KIT = Path(__file__).resolve().parent / "emulated"
# the shim's headers first, then the real include folder for what the shim does not replace
# (cudabench/hopper_host.h: tensor maps and the GPU check)
INCLUDES = [f"-I{KIT / 'shim'}", f"-I{KIT.parents[1] / 'cudabench' / 'spec' / 'include'}"]
ASAN = os.environ.get("ASAN") == "1"
# seconds per run of a checker, with room for a slow machine: a planted deadlock took 138 s on a CI-like
# machine while the scheduler waited 100,000 rounds of polling to report it; it now reports it after two
# rounds in which no polling wait ended (runtime/scheduler.cpp)
TIMEOUT = 600 if ASAN else 360


def _load_rewriter():
    spec = importlib.util.spec_from_file_location("emulated_rewrite_launches", KIT / "rewrite_launches.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


rewriter = _load_rewriter()


def compiler():
    for name in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def compiler_or_skip():
    """The C++ compiler the emulator is built with; the test is skipped where there is none, or no ucontext."""
    cxx = compiler()
    if cxx is None or not sys.platform.startswith("linux"):
        pytest.skip("the CUDA emulator needs a C++17 compiler (g++, c++, clang++ or $CXX) and Linux (ucontext)")
    return cxx


def run(cmd, timeout=TIMEOUT):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout)


def must(cmd):
    result = run(cmd)
    if result.returncode:
        pytest.fail(f"{' '.join(map(str, cmd))}\n{result.stderr[-6000:]}", pytrace=False)


def link(cxx, flags, objects, exe):
    """One executable from objects: paths, or futures of paths (compiled on the pool)."""
    must([cxx, *flags, *(o.result() if hasattr(o, "result") else o for o in objects), "-o", exe])
    return exe


def report(result):
    return f"exit status {result.returncode}\n{result.stdout}{result.stderr[-4000:]}"


class KernelChecker:
    """The emulator's runtime and one checker program compiled once (on the pool); then one checker binary per
    text of a kernel file, its launches rewritten for the emulator (a planted bug is another text)."""

    def __init__(self, cxx, workdir, pool, flags, runtime, check_source):
        self.cxx, self.workdir, self.flags = cxx, workdir, flags
        self.common = [pool.submit(self._object, src, ["-Wall", "-Wextra"]) for src in [*runtime, check_source]]

    def _object(self, src, flags, name=None):
        obj = self.workdir / ((name or src.stem) + ".o")
        must([self.cxx, *self.flags, *flags, "-c", src, "-o", obj])
        return obj

    def build(self, name, source_text):
        cu, cpp = self.workdir / f"{name}.cu", self.workdir / f"{name}.cpp"
        cu.write_text(source_text)
        _, launches = rewriter.rewrite_file(str(cu), str(cpp))
        assert launches > 0
        kernel = self._object(cpp, ["-w"], name)
        return link(self.cxx, self.flags, [*self.common, kernel], self.workdir / name)


HOPPER_RUNTIME = [KIT / "runtime" / name for name in ("scheduler.cpp", "warp_ops.cpp", "hopper_ops.cpp")]


def hopper_checker(workdir, pool, source, check_program):
    """A KernelChecker for a Hopper kernel file (its own folder on the include path, compiled as for sm_90)
    and its check program in tests/emulated."""
    flags = ["-std=c++17", "-O2", "-fno-strict-aliasing", "-Wno-psabi", *INCLUDES, f"-I{source.parent}",
             "-D__CUDA_ARCH__=900"]
    return KernelChecker(compiler_or_skip(), workdir, pool, flags, HOPPER_RUNTIME, KIT / check_program)


def assert_check_passes(binary, args):
    """The check program run on the real kernel: within tolerance, both schedules bit for bit alike."""
    result = run([binary, *args])
    assert result.returncode == 0 and result.stdout.splitlines()[-1:] == ["RESULT OK"], report(result)
    assert "schedules agree bit for bit: yes" in result.stdout


def assert_planted_bug_fails(checker, source, name, text, replacement, args):
    """The kernel with `text` (found once) replaced must fail its check: a wrong result, a disagreement
    between the schedules, an emulator check or a deadlock."""
    original = source.read_text()
    assert original.count(text) == 1, f"mutant {name}: the text to change is not (once) in {source.name}"
    result = run([checker.build(name, original.replace(text, replacement)), *args])
    failed = ("RESULT FAIL" in result.stdout or "EMULATOR CHECK FAILED" in result.stderr
              or "DEADLOCK" in result.stderr)
    assert result.returncode != 0 and failed, report(result)
