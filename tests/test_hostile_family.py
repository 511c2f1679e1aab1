"""The out-of-tree hostile test-bed families under tests/hostile_kernels: discovered beside the
built-in ones with exactly their variants, their reference right on the CPU, the Python-level
misbehaviours (cached, exit, segfault) doing what they say, and every source compiled for sm_90
where nvcc is installed."""

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cudabench.spec.build import compiler_errors
from cudabench.spec.compile_check import check_compile
from cudabench.spec.registry import discover

HOSTILE = Path(__file__).resolve().parent / "hostile_kernels"

VARIANTS = {
    "hostile": ["hostile-honest", "hostile-side-stream", "hostile-side-stream-late", "hostile-cached", "hostile-crash", "hostile-hang",
                "hostile-assert", "hostile-hoard", "hostile-exit", "hostile-segfault", "hostile-peek", "hostile-flag",
                "hostile-memo", "hostile-partial", "hostile-partial-skip", "hostile-mutate", "hostile-alias", "hostile-strided",
                "hostile-subclass", "hostile-float64", "hostile-uninit", "hostile-thread", "hostile-native-thread", "hostile-skip-thread",
                "hostile-take-threads", "hostile-late-thread", "hostile-helper", "hostile-plant", "hostile-tuned", "hostile-shape", "hostile-patch-timer",
                "hostile-swap-code", "hostile-patch-worker", "hostile-patch-library", "hostile-signal-timer", "hostile-finalizer",
                "hostile-persist-l2", "hostile-graph-counter",
                "hostile-graph-batch", "hostile-graph-shared", "hostile-graph-copy"],
    "boastful": ["boastful-honest"],
}


@pytest.fixture(scope="module")
def registry():
    return discover([HOSTILE])


def test_families_and_variants(registry):
    for name, variants in VARIANTS.items():
        family = registry.family(name)
        assert [v.name for v in family.variants] == variants
        assert family.directions == ("fwd",) and family.bound == "memory"
        assert family.default_shape() == {"n": 2**24}
        assert all(p.is_file() for p in family.source_paths())
        assert (family.folder / f"{name}.h").is_file()
    assert [b.name for b in registry.family("hostile").baselines] == ["torch"]
    assert registry.family("boastful").baselines == ()
    assert registry.family("hostile").work({"n": 1000}, "fwd") == (2000.0, 8000.0)
    assert registry.family("boastful").work({"n": 1000}, "fwd") == (2_000_000.0, 8_000_000.0)
    assert (HOSTILE / "README.md").is_file()


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_reference_is_2x_plus_1(registry, name):
    family = registry.family(name)
    inputs = family.make_inputs({"n": 1000}, torch.Generator().manual_seed(1), "cpu")
    x = inputs["x"]
    assert list(inputs) == ["x"] and x.dtype == torch.float32 and x.shape == (1000,)
    assert x.abs().min() > 0 and x.min() >= -1 and x.max() < 1
    x64 = x.double()
    assert torch.equal(family.reference(x64), 2 * x64 + 1)
    assert torch.equal(family.reference(torch.tensor([0.0, -1.0, 0.5])), torch.tensor([1.0, -1.0, 2.0]))


def test_torch_baseline_is_2x_plus_1(registry):
    op = registry.family("hostile").baseline("torch").make()
    x = torch.tensor([0.0, -1.0, 0.5])
    assert torch.equal(op(x), torch.tensor([1.0, -1.0, 2.0]))


class StandInExtension:
    """What the compiled binding does, on the CPU, counting launches."""

    def __init__(self):
        self.launches = 0

    def hostile(self, x, y, mode=0):
        self.launches += 1
        torch.add(2 * x, 1, out=y)


def test_cached_launches_once_per_input_pointer(registry):
    ext = StandInExtension()
    op = registry.family("hostile").variant("hostile-cached").bind(ext)
    x = torch.rand(64)
    first = op(x)
    assert torch.equal(first, 2 * x + 1) and ext.launches == 1
    x.add_(1)  # new values at the same pointer: the stale output comes back, nothing launched
    assert op(x) is first and ext.launches == 1
    op(torch.rand(64))
    assert ext.launches == 2


@pytest.mark.parametrize("variant, returncode", [("hostile-exit", 3), ("hostile-segfault", -signal.SIGSEGV)])
def test_process_killing_variants(variant, returncode):
    script = (f"import torch\nfrom pathlib import Path\nfrom cudabench.spec.registry import discover\n"
              f"op = discover([Path({str(HOSTILE)!r})]).family('hostile').variant({variant!r}).bind(None)\n"
              f"op(torch.zeros(4))\nprint('survived')\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == returncode, proc.stderr
    assert "survived" not in proc.stdout


@pytest.mark.skipif(not shutil.which("nvcc"), reason="needs nvcc")
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_compiles_for_sm_90(registry, name):
    checks = check_compile(registry.family(name), "sm_90")
    assert {c.source.name for c in checks} >= {f"{name}.cu"}
    for c in checks:
        assert c.ok, f"{c.source}:\n{compiler_errors(c.output)}"
