"""timex-wgmma's forward and gk (kernels/timex/timex_wgmma.cu) and its gw (timex_wgmma_gw.cu) checked on the CPU by running its real source on the
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
GW_SOURCE = ROOT / "kernels" / "timex" / "timex_wgmma_gw.cu"

# (dtype, B, C, T): one tile, ragged batch groups (B=33: a second group of one row), T short of whole tiles,
# the most tiles (12), and more items than the emulator's blocks (2 a share: each takes several, both buffers;
# 3, 5 and 6 items: an odd count leaves one block an item more)
CASES = [("bfloat16", 1, 1, 8), ("float16", 3, 2, 64), ("bfloat16", 33, 3, 768), ("float16", 40, 2, 760),
         ("bfloat16", 5, 3, 136), ("bfloat16", 3, 2, 320), ("bfloat16", 3, 5, 128)]
# gk (the same kernel, Wf's tiles transposed, K tiles fetched last first): the same kinds of shape
GK_CASES = [(*case, "gk") for case in [("bfloat16", 1, 1, 8), ("float16", 33, 3, 760), ("bfloat16", 40, 2, 768),
                                      ("bfloat16", 5, 3, 136), ("float16", 3, 5, 320)]]
# gw (a block per channel over all its batch groups: B=33 and 70 take 2 and 3; one tile; T short of whole tiles)
GW_CASES = [(*case, "gw") for case in [("bfloat16", 1, 1, 8), ("float16", 33, 3, 760), ("bfloat16", 70, 2, 768),
                                      ("bfloat16", 5, 3, 136), ("float16", 3, 2, 320)]]

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


# Planted bugs in gw: the tiles of the wrong diagonal, the fold's pairs, grid or class sums wrong, a fold before
# its products land, products before their tiles land, a tile loaded into the wrong slot, the batch groups' tiles
# overwritten while read, the second warpgroup's sums lost, a lag of every diagonal or gw's last column left
# out. (The emulator runs a warpgroup's warps in one order at a time, so the named barrier after a fold's flush,
# before the next diagonal's windows are written, is for racecheck on the GPU to vouch for.)
GW_SMALL = ("bfloat16", 3, 2, 320, "gw")  # the case most planted bugs in gw must fail (5 tiles: odd)
GW_MUTANTS = {
    "gw-g-tile-of-the-wrong-diagonal": ("(m + D < nt ? (m + D) * TILE_BYTES : zeros_off)", "(m + D < nt ? m * TILE_BYTES : zeros_off)", GW_SMALL),
    "gw-row-8-column-8-not-paired": ("sum[x][hi - j + 8] += acc[4 * j + 2 * hi + x]", "sum[x][hi - j + 8] += acc[4 * j + 2 - 2 * hi + x]", GW_SMALL),
    "gw-lane-7-takes-at-the-same-l": ("else if (i > 0) sum[0][i - 1] += v;", "else sum[0][i] += v;", GW_SMALL),
    "gw-sums-not-aligned-to-the-class-grid": ("total[a] = neg ? same : lower;", "total[a] = same;", GW_SMALL),
    "gw-class-lanes-added-in-pairs-only": ("step <= 2; step *= 2", "step <= 1; step *= 2", GW_SMALL),
    "gw-fold-before-its-products-land": ("      wgmma_wait<1>();\n", "", GW_SMALL),
    "gw-next-group-over-tiles-in-use": ("    __syncthreads();  // every product has read", "    // every product has read",
                                        ("bfloat16", 70, 1, 256, "gw")),
    "gw-products-before-their-last-loads-land": ("for (int i = 0; i < COUNT; ++i) mbar_wait", "for (int i = 0; i < COUNT - 1; ++i) mbar_wait", GW_SMALL),
    "gw-g-tile-loaded-into-the-wrong-slot": ("tma_load_3d(s.g[nt - 1 - i]", "tma_load_3d(s.g[i]", GW_SMALL),
    "gw-lag-63-of-every-diagonal-lost": ("o < 16 * 4; o += 128", "o < 16 * 4 - 1; o += 128", ("bfloat16", 33, 3, 760, "gw")),
    "gw-last-column-left-out": ("    if (d >= 0 && d < T) lags[d] += v;", "    if (d >= 0 && d < T - 1) lags[d] += v;",
                                ("bfloat16", 70, 2, 768, "gw")),
    "gw-second-warpgroup-lost": ("from_f<S>(s.lags[0][d] + s.lags[1][d])", "from_f<S>(s.lags[0][d])", GW_SMALL),
}

ALL_MUTANTS = {**MUTANTS, **GW_MUTANTS}


def source(case):
    """The kernel file of a case's direction."""
    return GW_SOURCE if case[-1] == "gw" else SOURCE


@pytest.fixture(scope="module")
def checkers(tmp_path_factory, pool):
    return {path: hopper_checker(tmp_path_factory.mktemp(path.stem), pool, path, "timex_wgmma_check.cpp")
            for path in (SOURCE, GW_SOURCE)}


@pytest.fixture(scope="module")
def real(checkers):
    return {path: checker.build(path.stem, path.read_text()) for path, checker in checkers.items()}


@pytest.mark.parametrize("case", CASES + GK_CASES + GW_CASES, ids=lambda c: "-".join(map(str, c)))
def test_timex_wgmma_matches_fp64_under_both_schedules(real, case):
    assert_check_passes(real[source(case)], args(case))


@pytest.mark.parametrize("name", sorted(ALL_MUTANTS))
def test_planted_bug_fails_the_check(checkers, name):
    text, replacement, case = ALL_MUTANTS[name]
    assert_planted_bug_fails(checkers[source(case)], source(case), name, text, replacement, args(case))
