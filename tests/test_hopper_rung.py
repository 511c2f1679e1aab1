"""The Hopper rungs (issue 29: matmul-wgmma, attn-flash3) on the CPU: the generated wgmma include is
current, their families build for sm_90a where a build for sm_90 is asked (and for other GPUs as they
are), nvcc compiles them both ways, and on a GPU that is not a Hopper one the variants are skipped with
the reason."""

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

from cudabench.errors import NotOnThisGPUError
from cudabench.spec.build import INCLUDE_DIR, with_features
from cudabench.spec.compile_check import nvcc_command
from cudabench.spec.registry import discover

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def matmul():
    return discover().family("matmul")


def test_the_generated_wgmma_include_is_what_its_generator_writes():
    spec = importlib.util.spec_from_file_location("gen_wgmma", INCLUDE_DIR / "cudabench" / "gen_wgmma.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert (INCLUDE_DIR / "cudabench" / "wgmma.inc").read_text() == gen.text()
    assert "m64n256k16" in gen.text() and "%127}" in gen.text()  # 128 accumulators for N = 256
    # the register-A form for both 16-bit types: four A registers after the accumulators, no A transpose bit
    assert "wgmma_m64n128k16_f16_rs" in gen.text() and "{%64, %65, %66, %67}, %68, p, 1, 1, %70;" in gen.text()


def test_a_build_for_sm_90_is_made_for_sm_90a_only_for_families_that_ask(matmul):
    assert with_features(matmul, "sm_90") == "sm_90a"
    assert with_features(discover().family("attention"), "sm_90") == "sm_90a"
    assert with_features(matmul, "sm_80") == "sm_80"
    assert with_features(matmul, "sm_100") == "sm_100"
    assert with_features(discover().family("add2"), "sm_90") == "sm_90"


HOPPER = ("wgmma.mma_async", "cp.async.bulk.tensor", "setmaxnreg")  # the instructions each Hopper kernel uses
TIMEX_HOPPER = HOPPER[:2]  # timex-wgmma: no warp specialisation, so no register budgets moved


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("kernel, instructions", [("matmul/matmul_wgmma.cu", HOPPER), ("attention/flash3.cu", HOPPER),
                                                  ("attention/flash3_bwd.cu", HOPPER),
                                                  ("timex/timex_wgmma.cu", TIMEX_HOPPER)])
@pytest.mark.parametrize("arch, wgmma", [("sm_90a", True), ("sm_80", False)])
def test_the_kernel_compiles_with_wgmma_for_sm_90a_and_without_it_elsewhere(tmp_path, kernel, instructions, arch,
                                                                             wgmma):
    source = ROOT / "kernels" / kernel
    done = subprocess.run([str(a) for a in nvcc_command("nvcc", source, arch, tmp_path / "k.o")], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    # the instructions themselves, in the PTX of the same compile (no cuobjdump needed)
    ptx = tmp_path / "k.ptx"
    command = [str(a) for a in nvcc_command("nvcc", source, arch, ptx)]
    command[command.index("-c")] = "-ptx"
    command = [a.replace(f"code=sm_{arch[3:]}", f"code=compute_{arch[3:]}") for a in command]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    text = ptx.read_text()
    assert all(instruction in text for instruction in instructions) == wgmma
    assert ("trap;" in text) != wgmma  # elsewhere the kernel body is a trap the binding never reaches


def test_attn_flash3_takes_16_bit_types_and_has_a_backward():
    v = discover().family("attention").variant("attn-flash3")
    assert v.dtypes == ("bfloat16", "float16") and v.has_backward
    assert v.constraints[0].holds({"D": 128}) and not v.constraints[0].holds({"D": 96})


def test_its_constraint_and_precision(matmul):
    v = matmul.variant("matmul-wgmma")
    assert v.dtypes == ("bfloat16",) and not v.has_backward
    ok = {"M": 256, "N": 512, "K": 128}
    assert all(c.holds(ok) for c in v.constraints)
    assert not all(c.holds({**ok, "N": 384}) for c in v.constraints)
    assert not all(c.holds({**ok, "K": 96}) for c in v.constraints)


@pytest.mark.parametrize("family, variant, reason_method", [("matmul", "matmul-wgmma", "matmul_wgmma_not_here"),
                                                            ("attention", "attn-flash3", "flash3_not_here"),
                                                            ("timex", "timex-wgmma", "wgmma_not_here")])
def test_on_another_gpu_the_variant_is_skipped_with_the_reason(family, variant, reason_method):
    """The variant's bind asks its extension why not here; a reason skips the subject (NotOnThisGPUError)."""
    not_hopper = type("NotHopper", (), {reason_method: lambda self: f"{variant} needs sm_90a (a Hopper GPU)"})()
    with pytest.raises(NotOnThisGPUError, match="needs sm_90a"):
        discover().family(family).variant(variant).bind(not_hopper)
