"""timex-fft's warp-held transforms (kernels/timex/timex_fft_warp.cu) and block-held long rows
(timex_fft_long.cu; both through fft_passes.cuh) checked on the CPU by running the real sources on the
CUDA emulator (tests/emulated): out, gk and gw against float64 direct sums of the definitions, at every
transform size the warp file handles (512, 768, 1024, 1536, 2048 points) and every long row size (2048 …
16384 packed points, both ways of the product step), odd B and C, the three dtypes, under two warp
orders that must agree bit for bit; for long rows also autograd's path, whose backward reads the
spectra its forward kept, bit for bit the same. Planted bugs show the check fails.

Needs a C++17 compiler on Linux (skipped otherwise), like tests/test_emulated_kernels.py.
"""

from pathlib import Path

import pytest

from emulator_kit import INCLUDES, compiler_or_skip, rewriter
from emulator_kit import link, must as _must, report as _report, run as _run

ROOT = Path(__file__).resolve().parents[1]
KIT = ROOT / "tests" / "emulated"
SOURCE = ROOT / "kernels" / "timex" / "timex_fft_warp.cu"
LONG_SOURCE = SOURCE.with_name("timex_fft_long.cu")
PASSES = SOURCE.with_name("fft_passes.cuh")
FLAGS = ["-std=c++17", "-O2", "-fno-strict-aliasing", *INCLUDES, f"-I{SOURCE.parent}",
         "-D__CUDA_ARCH__=900"]
RUNTIME = [KIT / "runtime" / "scheduler.cpp", KIT / "runtime" / "warp_ops.cpp", KIT / "runtime" / "hopper_ops.cpp"]

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
    # timex_fft_long.cu: M packed points per row (the smallest power of two >= T), held by a block
    ("float32", 2, 1, 1025),   # M = 2048 (radix 16, 16, 8), mirrors read from the buffer
    ("float32", 3, 1, 2048),
    ("float32", 1, 2, 3001),   # M = 4096 (radix 16, 16, 16)
    ("float32", 2, 1, 4096),
    ("bfloat16", 1, 1, 8192),  # M = 8192 (radix 16, 16, 16, 2), pairs taken in the buffer
    ("float32", 1, 1, 16384),  # M = 16384 (radix 32, 32, 16), the longest
    ("float32", 3, 150, 1100),  # many channels adding into S at once
]

# Planted bugs: (source, exact text in it, replacement, a case that must FAIL).
MUTANTS = {
    "twiddle-of-the-wrong-sign": (SOURCE, "return SIGN < 0 ? t : make_float2(t.x, -t.y);", "return t;",
                                  ("float32", 2, 1, 700)),
    "no-wait-before-reading-the-exchange": (
        PASSES, "  Sync::wait();\n#pragma unroll\n  for (int m = 0; m < (HALF_OUT",
        "#pragma unroll\n  for (int m = 0; m < (HALF_OUT", ("float32", 3, 1, 600)),
    "upper-half-read-as-zero-in-the-inverse": (
        SOURCE, "warp_fft<N, 1, false, true>(v, buf, TableTwiddles<1>{fresh",
        "warp_fft<N, 1, true, true>(v, buf, TableTwiddles<1>{fresh", ("float32", 2, 1, 300)),
    "long-upper-half-read-as-zero-in-the-inverse": (
        LONG_SOURCE, "group_fft<M, Plan::G, 1, false, true,", "group_fft<M, Plan::G, 1, true, true,",
        ("float32", 2, 1, 2048)),
    "long-mirror-of-the-next-point": (
        LONG_SOURCE, "buf[pad((M - (int)threadIdx.x - BlockPlan<M>::G * m) % M)]",
        "buf[pad((M + 1 - (int)threadIdx.x - BlockPlan<M>::G * m) % M)]", ("float32", 1, 1, 3001)),
    "long-no-wait-after-the-pairs": (
        LONG_SOURCE, "    if (g != f) buf[pad(g)] = product<CONJ>(g, zg, zf, W, tw, h);\n  });\n  __syncthreads();",
        "    if (g != f) buf[pad(g)] = product<CONJ>(g, zg, zf, W, tw, h);\n  });", ("float32", 1, 1, 5000)),
    # the pairs' loop of fixed length: the point M/2 (its own mirror) left out, or the last round of pairs
    "long-pairs-without-the-middle-point": (
        LONG_SOURCE, "  if (threadIdx.x == 0) f(M / 2, M / 2);\n", "", ("float32", 1, 1, 5000)),
    "long-pairs-one-round-short": (
        LONG_SOURCE, "for (int i = 0; i < M / 2 / G; ++i) {", "for (int i = 0; i < M / 2 / G - 1; ++i) {",
        ("float32", 1, 1, 16384)),
    # autograd's path (the forward keeps each row's spectrum for the backward): none kept, and kept while
    # the product step already writes over the mirrors it reads
    "long-forward-keeps-no-row-spectra": (
        LONG_SOURCE, "    store_half_spectrum<M>(v, buf, tw, kspec + ((size_t)b * C + c) * (M + 1));\n", "",
        ("float32", 2, 1, 1025)),
    "long-kept-spectra-read-under-the-product": (
        LONG_SOURCE, "    if constexpr (BlockPlan<M>::pairs_in_buffer) __syncthreads();", "", ("float32", 1, 1, 5000)),
}




def _tolerance(registry, dtype):
    return repr(registry.family("timex").tolerance_for(dtype))


class Checker:
    """The emulator and timex_check compiled once; one checker binary per kernel source."""

    def __init__(self, cxx, workdir, pool):
        self.cxx, self.workdir, self.pool = cxx, workdir, pool
        self.rewriter = rewriter
        self.common = [pool.submit(self._object, src, ["-Wall", "-Wextra"])
                       for src in RUNTIME + [KIT / "timex_check.cpp"]]

    def _object(self, src, flags, name=None):
        obj = self.workdir / ((name or src.stem) + ".o")
        _must([self.cxx, *FLAGS, *flags, "-c", src, "-o", obj])
        return obj

    def kernel(self, name, source_text, folder):
        """A kernel source rewritten for the emulator, then compiled (its own headers first from folder)."""
        cu = folder / f"{name}.cu"
        cu.write_text(source_text)
        cpp = folder / f"{name}.cpp"
        _, launches = self.rewriter.rewrite_file(str(cu), str(cpp))
        assert launches > 0
        return self._object(cpp, ["-w"], name)

    def build(self, name, replacing=None):
        """The checker over both sources, or with a source or header replaced ({path: text}): a replaced
        header is written beside the rewritten sources, where their #include "..." finds it first."""
        replacing = replacing or {}
        folder = self.workdir / f"{name}-src"
        folder.mkdir()
        for path, text in replacing.items():
            if path.suffix == ".cuh":
                (folder / path.name).write_text(text)
        kernels = [self.kernel(f"{name}-{src.stem}", replacing.get(src, src.read_text()), folder)
                   for src in (SOURCE, LONG_SOURCE)]
        return link(self.cxx, FLAGS, [*self.common, *kernels], self.workdir / name)


@pytest.fixture(scope="module")
def checker(tmp_path_factory, pool):
    return Checker(compiler_or_skip(), tmp_path_factory.mktemp("emulated-timex"), pool)


@pytest.fixture(scope="module")
def real(checker):
    return checker.build("timex_check")


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-B{c[1]}-C{c[2]}-T{c[3]}")
def test_warp_fft_matches_fp64_sums_under_both_warp_orders(real, registry, case):
    dtype, B, C, T = case
    result = _run([real, dtype, B, C, T, _tolerance(registry, dtype)])
    lines = result.stdout.splitlines()
    assert result.returncode == 0 and lines[-1:] == ["RESULT OK"], _report(result)
    assert ("no backward here" in result.stdout) == (768 < T <= 1024), result.stdout


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_planted_bug_fails_the_check(checker, registry, name):
    source, text, replacement, (dtype, B, C, T) = MUTANTS[name]
    original = source.read_text()
    assert original.count(text) == 1, f"mutant {name}: the text to change is not (once) in {source.name}"
    exe = checker.build(name, {source: original.replace(text, replacement)})
    result = _run([exe, dtype, B, C, T, _tolerance(registry, dtype)])
    assert result.returncode != 0 and "RESULT FAIL" in result.stdout, _report(result)


def test_checker_refuses_a_length_off_this_path(real):
    result = _run([real, "float32", 1, 1, 100])  # timex_fft.cu's short rows: not emulated
    assert result.returncode == 2 and "usage" in result.stderr
