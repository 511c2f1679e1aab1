"""Incremental builds of a CUDA family on the GPU: an edit of the .cu recompiles that unit only (not
the torch binding, the slow one), and the code that runs in the same process afterwards is the
edited one. The CPU twin is tests/test_incremental_build.py (host-only C++)."""

import shutil
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from cudabench.spec.build import build
from cudabench.spec.registry import discover

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

KERNELS = Path(__file__).resolve().parents[2] / "kernels"


def objects(directory: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in directory.glob("*.o")}


def test_an_edit_of_the_cu_rebuilds_it_alone_and_the_new_kernel_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDABENCH_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "add2"
    shutil.copytree(KERNELS / "add2", folder, ignore=shutil.ignore_patterns("__pycache__"))
    family = replace(discover().family("add2"), folder=folder)
    a, b = torch.rand(1000, device="cuda"), torch.rand(1000, device="cuda")

    first = build(family)
    c = torch.empty_like(a)
    first.module.add2(a, b, c)
    assert torch.equal(c, a + b)
    before = objects(first.directory)

    source = folder / "add2.cu"
    time.sleep(0.01)
    source.write_text(source.read_text().replace("c[i] = a[i] + b[i];", "c[i] = a[i] + b[i] + 1.0f;")
                      .replace("return make_float4(x.x + y.x,", "return make_float4(x.x + y.x + 1.0f,")
                      .replace("x.y + y.y, x.z + y.z, x.w + y.w)", "x.y + y.y + 1.0f, x.z + y.z + 1.0f, x.w + y.w + 1.0f)"))
    second = build(family)
    after = objects(second.directory)
    assert not second.cache_hit and second.directory == first.directory
    changed = {name for name in before if after.get(name) != before[name]}
    assert changed == {"add2.cuda.o"}, (before, after)
    second.module.add2(a, b, c)
    assert torch.equal(c, a + b + 1)  # the edited kernel, in a process that loaded the old one
    first.module.add2(a, b, c)
    assert torch.equal(c, a + b)      # and the old module still runs its own code
