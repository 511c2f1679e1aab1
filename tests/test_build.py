"""Build helpers, the cache key, compiler-error extraction, and a compile-only check of every
kernel source with nvcc (and the bindings against torch's headers) where nvcc is installed."""

import os
import shutil
import stat
from dataclasses import replace

import pytest

from cudabench.spec.build import build_key, compiler_errors, cuda_home_for_torch, gencode, normalize_arch, torch_arch_list
from cudabench.spec.compile_check import check_compile
from cudabench.errors import ShapeError


@pytest.mark.parametrize("given, arch, listed", [
    ("sm_90", "sm_90", "9.0"), ("90", "sm_90", "9.0"), ("9.0", "sm_90", "9.0"), ("sm_90a", "sm_90a", "9.0a"),
    ("sm_120", "sm_120", "12.0"),
])
def test_arch_spellings(given, arch, listed):
    assert normalize_arch(given) == arch and torch_arch_list(arch) == listed


def test_bad_arch_is_a_usage_error():
    with pytest.raises(ShapeError) as caught:
        normalize_arch("hopper")
    assert caught.value.exit_code == 2


def test_gencode():
    assert gencode("sm_90a") == "-gencode=arch=compute_90a,code=sm_90a"


def test_cache_key_follows_sources_flags_and_arch(registry, tmp_path):
    family = registry.family("add2")
    copy = tmp_path / "add2"
    shutil.copytree(family.folder, copy)
    moved = replace(family, folder=copy)
    key = build_key(moved, "sm_90", ("-O3",))
    assert key == build_key(moved, "sm_90", ("-O3",))
    assert key != build_key(moved, "sm_80", ("-O3",)) and key != build_key(moved, "sm_90", ("-O2",))
    (copy / "add2.cu").write_text((copy / "add2.cu").read_text() + "\n// edit\n")
    assert key != build_key(moved, "sm_90", ("-O3",))


def test_compiler_errors_keep_file_and_line():
    log = """ninja: build stopped
[1/3] nvcc -c timex.cu
/src/kernels/timex/timex.cu(42): error: identifier "foo" is undefined
/src/kernels/timex/timex.cu(43): warning: something
/src/kernels/timex/timex.cpp:7:3: error: 'bar' was not declared in this scope
FAILED: timex.cuda.o
"""
    text = compiler_errors(log)
    assert "/src/kernels/timex/timex.cu:42: error: identifier \"foo\" is undefined" in text
    assert "timex.cpp:7:3: error: 'bar'" in text
    assert "warning" not in text


def test_compile_check_reports_a_broken_source(registry, tmp_path):
    if not shutil.which("nvcc"):
        pytest.skip("needs nvcc")
    family = registry.family("add2")
    copy = tmp_path / "add2"
    shutil.copytree(family.folder, copy)
    (copy / "add2.cu").write_text((copy / "add2.cu").read_text().replace("c[i] = a[i] + b[i];", "c[i] = a[i] + q;"))
    checks = check_compile(replace(family, folder=copy), "sm_90", bindings=False)
    assert [c.ok for c in checks] == [False]
    assert 'add2.cu:' in compiler_errors(checks[0].output) and '"q"' in checks[0].output


@pytest.mark.skipif(not shutil.which("nvcc"), reason="needs nvcc")
def test_every_kernel_compiles_for_sm_90(registry):
    for family in registry.families:
        for c in check_compile(family, "sm_90"):
            assert c.ok, f"{c.source}:\n{compiler_errors(c.output)}"


@pytest.mark.skipif(not shutil.which("nvcc"), reason="needs nvcc")
def test_every_kernels_device_code_compiles_for_sm_80(registry, tmp_path):
    """An Ampere GPU builds every family (the Hopper rungs compile to a trap there and are skipped with the
    reason): each .cu's PTX for compute_80, the front end's overloads and arch guards checked without ptxas.
    timex_fft_warp.cu once called atomicAdd(float2*), which exists from sm_90 on only."""
    import subprocess
    from concurrent.futures import ThreadPoolExecutor

    from cudabench.spec.compile_check import nvcc_command

    def ptx(source):
        command = [str(a) for a in nvcc_command("nvcc", source, "sm_80", tmp_path / f"{source.stem}.ptx")]
        command[command.index("-c")] = "-ptx"
        command = [a.replace("code=sm_80", "code=compute_80") for a in command]
        return source, subprocess.run(command, capture_output=True, text=True)

    sources = [f.folder / name for f in registry.families for name in f.sources if name.endswith(".cu")]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for source, done in pool.map(ptx, sources):
            assert done.returncode == 0, f"{source}:\n{compiler_errors(done.stderr)}"


@pytest.fixture
def nvcc_wrapper(tmp_path, monkeypatch):
    """PATH's nvcc is a wrapper script around a toolkit elsewhere; the user set no CUDA_HOME."""
    wrapper = tmp_path / "bin" / "nvcc"
    wrapper.parent.mkdir()
    wrapper.write_text('#!/bin/sh\n[ "$1" = --dryrun ] && echo "#$ TOP=/opt/cuda-12.4/bin/.." >&2\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(wrapper.parent))
    for name in ("CUDA_HOME", "CUDA_PATH", "CUDABENCH_NVCC"):
        monkeypatch.delenv(name, raising=False)
    return wrapper


def test_jit_build_takes_cuda_home_from_the_nvcc_it_finds(nvcc_wrapper):
    from torch.utils import cpp_extension

    before = cpp_extension.CUDA_HOME
    with cuda_home_for_torch(cpp_extension) as home:
        assert home == "/opt/cuda-12.4" and os.environ["CUDA_HOME"] == home
        # what torch's JIT compiles against: the toolkit's headers, not <folder above the wrapper>/include
        assert cpp_extension.include_paths("cuda")[-1] == "/opt/cuda-12.4/include"
    assert cpp_extension.CUDA_HOME == before and "CUDA_HOME" not in os.environ


def test_jit_build_leaves_a_cuda_home_the_user_set_alone(nvcc_wrapper, monkeypatch):
    from torch.utils import cpp_extension

    monkeypatch.setenv("CUDA_HOME", "/opt/mine")
    before = cpp_extension.CUDA_HOME
    with cuda_home_for_torch(cpp_extension) as home:
        assert home is None and cpp_extension.CUDA_HOME == before and os.environ["CUDA_HOME"] == "/opt/mine"
