"""timex-wgmma's forward and gk (kernels/timex/timex_wgmma.cu) checked on the CPU by running its real source on the
CUDA emulator (tests/emulated): TMA boxes, mbarriers, wgmma with A from registers, cp.async and persistent
blocks that fill a second buffer while they use the first. Against float64 direct sums at ragged shapes, in
bfloat16 and float16, under two schedules that must agree bit for bit; the planted bugs below show the check
can fail. The kernel's figures on the H100 (docs/benchmarks/h100-hopper.md) vouch for the emulator's model.

Needs a C++17 compiler on Linux (skipped otherwise), like tests/test_emulated_hopper.py.
"""

from pathlib import Path

import pytest

from emulator_kit import assert_check_passes, assert_planted_bug_fails, hopper_checker

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "kernels" / "timex" / "timex_wgmma.cu"

# (dtype, B, C, T): one tile, ragged batch groups (B=33: a second group of one row), T short of whole tiles,
# the most tiles (12), and more items than the emulator's blocks (2 a share: each takes several, both buffers;
# 3, 5 and 6 items: an odd count leaves one block an item more)
CASES = [("bfloat16", 1, 1, 8), ("float16", 3, 2, 64), ("bfloat16", 33, 3, 768), ("float16", 40, 2, 760),
         ("bfloat16", 5, 3, 136), ("bfloat16", 3, 2, 320), ("bfloat16", 3, 5, 128)]
# gk (the same kernel, Wf's tiles transposed, K tiles fetched last first): the same kinds of shape
GK_CASES = [(*case, "gk") for case in [("bfloat16", 1, 1, 8), ("float16", 33, 3, 760), ("bfloat16", 40, 2, 768),
                                      ("bfloat16", 5, 3, 136), ("float16", 3, 5, 320)]]

# Planted bugs: (exact text in the kernel, replacement, a case that must FAIL).
MUTANTS = {
    "a-fragment-of-the-wrong-row": ("a[kk][1] = p[-8 * dir];", "a[kk][1] = p[8 * dir];", ("bfloat16", 33, 2, 448)),
    "a-fragment-columns-at-half-distance": ("pair_row - TILE * d + dir * 16 * kk", "pair_row - TILE * d + dir * 8 * kk",
                                            ("bfloat16", 33, 2, 448)),
    "k-tile-read-before-it-lands": ("    mbar_wait(&k_full[BACK ? d : nt - 1 - d], parity);\n", "", ("bfloat16", 33, 2, 448)),
    "next-fragments-loaded-while-read": ("    wgmma_wait<0>();  // a[] is read", "    // a[] is read",
                                         ("bfloat16", 33, 2, 448)),
    "outputs-staged-unswizzled": ("(((t / 8) ^ (b % 8)) * 8)", "((t / 8) * 8)", ("float16", 3, 2, 64)),
    "mbarrier-phase-of-the-first-use": ("(n >> 1) & 1, c, b0", "0, c, b0", ("bfloat16", 3, 5, 128)),
    "w-row-read-before-it-lands": ("    tensor_core::cp_async_wait<0>();\n", "", ("bfloat16", 3, 5, 128)),
    "next-item-of-the-wrong-block": ("fetch(item + gridDim.x, p ^ 1)", "fetch(item + 1, p ^ 1)", ("bfloat16", 3, 5, 128)),
    "next-item-fetched-into-the-buffer-in-use": ("fetch(item + gridDim.x, p ^ 1)", "fetch(item + gridDim.x, p)",
                                                 ("bfloat16", 3, 3, 128)),
    "gk-fragment-of-the-wrong-column": ("a[kk][2] = p[8 * dir];", "a[kk][2] = p[-8 * dir];", ("bfloat16", 33, 2, 448, "gk")),
    "gk-pairs-the-forward-way": ("(BACK ? (i > 0 ? wbits[i - 1] : 0) : wbits[i + 1])", "wbits[i + 1]",
                                 ("bfloat16", 33, 2, 448, "gk")),
    "gk-k-tile-waited-in-the-forward-order": ("mbar_wait(&k_full[BACK ? d : nt - 1 - d], parity)",
                                              "mbar_wait(&k_full[nt - 1 - d], parity)", ("bfloat16", 3, 2, 448, "gk")),
    "gk-tile-past-the-end-taken": ("i >= 0 && i < nt && j < nt ?", "i >= 0 && j < nt ?", ("bfloat16", 3, 2, 320, "gk")),
}


def args(case):
    dtype, *rest = case
    return ["f16" if dtype == "float16" else "bf16", *map(str, rest)]


@pytest.fixture(scope="module")
def checker(tmp_path_factory, pool):
    return hopper_checker(tmp_path_factory.mktemp("emulated-timex-wgmma"), pool, SOURCE, "timex_wgmma_check.cpp")


@pytest.fixture(scope="module")
def real(checker):
    return checker.build("timex_wgmma", SOURCE.read_text())


@pytest.mark.parametrize("case", CASES + GK_CASES, ids=lambda c: "-".join(map(str, c)))
def test_timex_wgmma_matches_fp64_under_both_schedules(real, case):
    assert_check_passes(real, args(case))


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_planted_bug_fails_the_check(checker, name):
    text, replacement, case = MUTANTS[name]
    assert_planted_bug_fails(checker, SOURCE, name, text, replacement, args(case))
