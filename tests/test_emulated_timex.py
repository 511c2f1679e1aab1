"""timex-fft's warp-held transforms (kernels/timex/timex_fft_warp.cu) checked on the CPU by running the real
source on the CUDA emulator (tests/emulated): out, gk and gw against float64 direct sums of the
definitions, at every transform size the file handles (512, 768, 1024, 1536, 2048 points), odd B and C,
the three dtypes, under two warp orders that must agree bit for bit. Planted bugs show the check fails.

Needs a C++17 compiler on Linux (skipped otherwise), like tests/test_emulated_kernels.py.
"""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
KIT = ROOT / "tests" / "emulated"
SOURCE = ROOT / "kernels" / "timex" / "timex_fft_warp.cu"
FLAGS = ["-std=c++17", "-O2", "-fno-strict-aliasing", f"-I{KIT / 'shim'}", f"-I{SOURCE.parent}",
         "-D__CUDA_ARCH__=900"]
RUNTIME = [KIT / "runtime" / "scheduler.cpp", KIT / "runtime" / "warp_ops.cpp"]

# (dtype, B, C, T): T picks the transform size N (the smallest 2^p or 3·2^p >= 2T-1); T > 768 has no
# backward on this path (timex_fft.cu's kernel does it), so the checker checks the forward alone there.
CASES = [
    ("float32", 3, 2, 193),    # N = 512, the shortest T on this path
    ("float32", 2, 1, 384),    # N = 768
    ("float32", 1, 3, 385),    # N = 1024 (radix 32, 32)
    ("float32", 5, 1, 512),
    ("float32", 3, 1, 513),    # N = 1536 (radix 16, 16, 6)
    ("float32", 2, 2, 768),    # the seed shape's T
    ("float32", 3, 1, 769),    # N = 2048, forward only
    ("float32", 1, 1, 1024),
    ("bfloat16", 3, 2, 700),
    ("float16", 5, 1, 1000),
]

# Planted bugs: (exact text in timex_fft_warp.cu, replacement, a case that must FAIL).
MUTANTS = {
    "twiddle-of-the-wrong-sign": ("return SIGN < 0 ? t : make_float2(t.x, -t.y);", "return t;",
                                  ("float32", 2, 1, 700)),
    "no-wait-before-reading-the-exchange": (
        "  __syncwarp();\n#pragma unroll\n  for (int m = 0; m < (HALF_OUT", "#pragma unroll\n  for (int m = 0; m < (HALF_OUT",
        ("float32", 3, 1, 600)),
    "upper-half-read-as-zero-in-the-inverse": (
        "warp_fft<N, 1, false, true>(v, buf, TableTwiddles<1>{table}, lane);\n#pragma unroll\n  for (int m = 0; m < N / LANES / 2; ++m) {\n    const int n = lane + LANES * m;\n    if (n < T) {\n      out",
        "warp_fft<N, 1, true, true>(v, buf, TableTwiddles<1>{table}, lane);\n#pragma unroll\n  for (int m = 0; m < N / LANES / 2; ++m) {\n    const int n = lane + LANES * m;\n    if (n < T) {\n      out",
        ("float32", 2, 1, 300)),
}


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The attention kit's helpers (compiler lookup, runs, the launch rewriter) and its thread pool fixture.
_attention_kit = _load("emulated_attention_kit", Path(__file__).with_name("test_emulated_kernels.py"))
_compiler, _run, _must, _report = (_attention_kit._compiler, _attention_kit._run, _attention_kit._must,
                                   _attention_kit._report)
pool = _attention_kit.pool


def _tolerance(registry, dtype):
    return repr(registry.family("timex").tolerance_for(dtype))


class Checker:
    """The emulator and timex_check compiled once; one checker binary per kernel source."""

    def __init__(self, cxx, workdir, pool):
        self.cxx, self.workdir, self.pool = cxx, workdir, pool
        self.rewriter = _attention_kit.rewriter
        self.common = [pool.submit(self._object, src, ["-Wall", "-Wextra"])
                       for src in RUNTIME + [KIT / "timex_check.cpp"]]

    def _object(self, src, flags, name=None):
        obj = self.workdir / ((name or src.stem) + ".o")
        _must([self.cxx, *FLAGS, *flags, "-c", src, "-o", obj])
        return obj

    def build(self, name, source_text):
        cu = self.workdir / f"{name}.cu"
        cu.write_text(source_text)
        cpp = self.workdir / f"{name}.cpp"
        _, launches = self.rewriter.rewrite_file(str(cu), str(cpp))
        assert launches > 0
        kernel = self._object(cpp, ["-w"], name)
        exe = self.workdir / name
        _must([self.cxx, *FLAGS, *(f.result() for f in self.common), kernel, "-o", exe])
        return exe


@pytest.fixture(scope="module")
def checker(tmp_path_factory, pool):
    cxx = _compiler()
    if cxx is None or not sys.platform.startswith("linux"):
        pytest.skip("the CUDA emulator needs a C++17 compiler (g++, c++, clang++ or $CXX) and Linux (ucontext)")
    return Checker(cxx, tmp_path_factory.mktemp("emulated-timex"), pool)


@pytest.fixture(scope="module")
def real(checker):
    return checker.build("timex_fft_warp", SOURCE.read_text())


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-B{c[1]}-C{c[2]}-T{c[3]}")
def test_warp_fft_matches_fp64_sums_under_both_warp_orders(real, registry, case):
    dtype, B, C, T = case
    result = _run([real, dtype, B, C, T, _tolerance(registry, dtype)])
    lines = result.stdout.splitlines()
    assert result.returncode == 0 and lines[-1:] == ["RESULT OK"], _report(result)
    assert ("no backward here" in result.stdout) == (T > 768), result.stdout


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_planted_bug_fails_the_check(checker, registry, name):
    text, replacement, (dtype, B, C, T) = MUTANTS[name]
    source = SOURCE.read_text()
    assert source.count(text) == 1, f"mutant {name}: the text to change is not (once) in {SOURCE.name}"
    exe = checker.build(name, source.replace(text, replacement))
    result = _run([exe, dtype, B, C, T, _tolerance(registry, dtype)])
    assert result.returncode != 0 and "RESULT FAIL" in result.stdout, _report(result)


def test_checker_refuses_a_length_off_this_path(real):
    result = _run([real, "float32", 1, 1, 100])
    assert result.returncode == 2 and "usage" in result.stderr
