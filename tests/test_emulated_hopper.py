"""matmul-wgmma (kernels/matmul/matmul_wgmma.cu) checked on the CPU by running its real source on the CUDA
emulator (tests/emulated), extended with Hopper's machinery: mbarriers, TMA boxes with the 128-byte
swizzle, wgmma from descriptors or registers (shim/cudabench/hopper.cuh, runtime/hopper_ops.cpp). The
product against a float64 one, both tile widths, M, N and K in several tile counts, under two schedules
that must agree bit for bit (TMA boxes and wgmma products landing as late as they may, or at their issue). The kernel's figures on the H100
(docs/benchmarks/h100-hopper.md) vouch for the emulator's model of the descriptors and the swizzle; the
planted bugs below show the check can fail.

Needs a C++17 compiler on Linux (skipped otherwise), like tests/test_emulated_kernels.py.
"""

from pathlib import Path

import pytest

from emulator_kit import assert_check_passes, assert_planted_bug_fails, hopper_checker

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "kernels" / "matmul" / "matmul_wgmma.cu"

# (M, N, K, BN): one tile, several row and column tiles, K over several pipeline stages (64 each; 4 or 6
# stages), and more row tiles than a group of the tile order (16) holds
CASES = [(128, 256, 64, 256), (256, 512, 448, 256), (128, 128, 64, 128), (384, 256, 832, 128),
         (2304, 512, 64, 256)]

# Planted bugs: (exact text in the kernel, replacement, a case that must FAIL).
MUTANTS = {
    "b-chunks-at-the-wrong-distance": ("64 * BK * 2)", "64 * BK)", (256, 512, 448, 256)),
    "a-k-slices-at-the-wrong-offset": ("&s.a[st][row0 * BK + k * 16]", "&s.a[st][row0 * BK + k * 8]",
                                       (128, 256, 64, 256)),
    "waiting-for-one-product-less": ("wgmma_wait<1>();", "wgmma_wait<2>();", (256, 512, 448, 256)),
    "releasing-the-buffer-being-read": ("mbar_arrive(&s.empty[(t - 1) % T::STAGES])",
                                        "mbar_arrive(&s.empty[t % T::STAGES])", (256, 512, 448, 256)),
    "second-row-of-a-fragment-misplaced": ("c[size_t(row + 8) * N + col]", "c[size_t(row + 7) * N + col]",
                                           (128, 128, 64, 128)),
    "reading-a-buffer-before-it-is-full": ("    mbar_wait(&s.full[st], (t / T::STAGES) & 1);\n", "",
                                           (256, 512, 448, 256)),
    "tile-order-of-a-full-group-in-the-last": ("n0 = (in_group / rows_here) * BN", "n0 = (in_group / GROUP_M) * BN",
                                               (2304, 512, 64, 256)),
}


@pytest.fixture(scope="module")
def checker(tmp_path_factory, pool):
    return hopper_checker(tmp_path_factory.mktemp("emulated-hopper"), pool, SOURCE, "matmul_wgmma_check.cpp")


@pytest.fixture(scope="module")
def real(checker):
    return checker.build("matmul_wgmma", SOURCE.read_text())


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c)))
def test_matmul_wgmma_matches_fp64_under_both_schedules(real, case):
    assert_check_passes(real, case)


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_planted_bug_fails_the_check(checker, name):
    text, replacement, case = MUTANTS[name]
    assert_planted_bug_fails(checker, SOURCE, name, text, replacement, case)
