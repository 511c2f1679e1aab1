"""matmul: C = A·B in float32 — the naive → shared-memory-tiled ladder, against cuBLAS (TF32 off) —
and matmul-wgmma, the Hopper rung in bfloat16 (TMA, mbarriers, wgmma, warp specialisation)."""

import torch

from cudabench.errors import NotOnThisGPUError
from cudabench.spec import DTYPES, Baseline, Constraint, Family, Param, Variant, empty

NAIVE, TILED, REGTILE = 0, 1, 2


def make_inputs(shape, gen, device):
    M, N, K = shape["M"], shape["N"], shape["K"]
    A = torch.empty(M, K, device=device).uniform_(-1, 1, generator=gen)
    B = torch.empty(K, N, device=device).uniform_(-1, 1, generator=gen)
    return {"A": A, "B": B}


def reference(A, B):
    return A @ B


def work(shape, direction):
    M, N, K = shape["M"], shape["N"], shape["K"]
    return 2.0 * M * N * K, 4.0 * (M * K + K * N + M * N)


def bind(variant):
    def make(ext):
        def matmul(A, B):
            C = empty((A.shape[0], B.shape[1]), like=A)
            ext.matmul(A, B, C, variant)
            return C

        return matmul

    return make


WGMMA_BN = 256  # the tile width matmul-wgmma runs with (the kernel also has 128)


def bind_wgmma(ext):
    """matmul-wgmma's op; on a GPU other than a Hopper one the subject is skipped with the reason."""
    why = ext.matmul_wgmma_not_here()
    if why:
        raise NotOnThisGPUError(why)

    def matmul_wgmma(A, B):
        C = empty((A.shape[0], B.shape[1]), like=A)
        ext.matmul_wgmma(A, B, C, WGMMA_BN)
        return C

    return matmul_wgmma


def torch_matmul():
    def matmul(A, B):
        # cuBLAS SGEMM in true fp32: the run turns TF32 off for every subject (see runner).
        return torch.matmul(A, B)

    return matmul


FITS_INT32 = Constraint(
    "M*K, K*N, M*N < 2^31",
    lambda s: max(s["M"] * s["K"], s["K"] * s["N"], s["M"] * s["N"]) < 2**31,
    "each matrix must have fewer than 2^31 elements (32-bit indices)",
)
GRID_ROWS = Constraint(
    "M <= 1048560", lambda s: s["M"] <= 65535 * 16,
    "M must be at most 1048560: the grid's y dimension (65535 blocks) holds rows of 16",
)

TILE_128 = Constraint("M % 128 == 0, N % 128 == 0, K % 8 == 0",
                      lambda s: s["M"] % 128 == 0 and s["N"] % 128 == 0 and s["K"] % 8 == 0,
                      "M and N must be multiples of 128 and K of 8: whole 128×128×8 tiles, no edge code")

WGMMA_TILES = Constraint(f"M % 128 == 0, N % {WGMMA_BN} == 0, K % 64 == 0",
                        lambda s: s["M"] % 128 == 0 and s["N"] % WGMMA_BN == 0 and s["K"] % 64 == 0,
                        f"M must be a multiple of 128, N of {WGMMA_BN} and K of 64: whole 128×{WGMMA_BN}×64 tiles, "
                        "no edge code")


def reduction(shape, direction: str) -> int:
    """The longest sum an output takes: K products."""
    return shape["K"]


FAMILY = Family(
    name="matmul",
    summary="C = A·B, float32, row-major",
    sources=("matmul.cu", "matmul_wgmma.cu", "matmul.cpp"),
    params=(Param("M", 2048, "rows of A and C"), Param("N", 2048, "columns of B and C"),
            Param("K", 2048, "columns of A, rows of B")),
    make_inputs=make_inputs,
    reference=reference,
    variants=(
        Variant("matmul-naive", "one thread per output, 16×16 blocks, global loads", bind(NAIVE),
                has_backward=False),
        Variant("matmul-tiled", "32×32 shared-memory tiles", bind(TILED), has_backward=False),
        Variant("matmul-regtile", "128×128 block tiles, 8×8 outputs per thread in registers, float4, "
                "double-buffered", bind(REGTILE), (TILE_128,), has_backward=False),
        Variant("matmul-wgmma", "bfloat16 on Hopper (sm_90a): TMA tiles into swizzled shared memory, "
                "mbarriers, wgmma 64×256×16 from shared memory, one loading and two multiplying warpgroups",
                bind_wgmma, (WGMMA_TILES,), has_backward=False, dtypes=("bfloat16",)),
    ),
    baselines=(Baseline("torch-matmul", "torch.matmul (cuBLAS: SGEMM with TF32 off in float32; tensor cores "
                        "in bfloat16 and float16)", torch_matmul, has_backward=False, dtypes=DTYPES),),
    dtypes=DTYPES,
    constraints=(FITS_INT32, GRID_ROWS),
    work=work,
    bound="sgemm",
    feature_archs=("sm_90a",),  # matmul-wgmma's wgmma and setmaxnreg exist only there
    tolerance=1e-5,
    reduction=reduction,
)
