"""The out-of-tree example family under examples/my_kernels: discovered beside the built-in ones,
its reference and inputs right on the CPU, its Python binding checked through the real correctness
gate with a stand-in extension, and its sources compiled for sm_90 where nvcc is installed."""

import shutil
from pathlib import Path

import pytest
import torch

from cudabench.spec.build import compiler_errors
from cudabench.spec.compile_check import check_compile
from cudabench.measure.check import check_workload
from cudabench.results.records.model import Case
from cudabench.spec.registry import discover
from cudabench.measure.subject import case_data
from cudabench.measure.workload import make_workload

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "my_kernels"


@pytest.fixture(scope="module")
def scale():
    return discover([EXAMPLES]).family("scale")


def test_discovered_beside_the_builtin_families(registry):
    builtin = [f.name for f in registry.families]
    registry = discover([EXAMPLES])
    assert [f.name for f in registry.families] == [*builtin, "scale"]
    assert [v.name for _, v in registry.resolve(["scale"])] == ["scale"]
    family = registry.family("scale")
    assert [b.name for b in family.baselines] == ["torch-scale"] and family.directions == ("fwd",)
    assert family.default_shape() == {"n": 2**20}
    assert all(p.is_file() for p in family.source_paths())
    assert (family.folder / "scale.h").is_file() and (EXAMPLES / "README.md").is_file()


def test_inputs_are_random_and_never_zero(scale):
    a = scale.make_inputs({"n": 1000}, torch.Generator().manual_seed(1), "cpu")
    b = scale.make_inputs({"n": 1000}, torch.Generator().manual_seed(2), "cpu")
    assert a["x"].dtype == torch.float32 and a["x"].shape == (1000,) and a["x"].abs().min() > 0
    assert a["alpha"] != 0 and a["alpha"] != 1 and a["beta"] != 0
    assert not torch.equal(a["x"], b["x"]) and a["alpha"] != b["alpha"]


def test_reference_is_alpha_x_plus_beta_in_fp64(scale):
    x = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    assert scale.reference(x, 3.0, 0.25).tolist() == [3.25, -5.75, 1.75]
    assert scale.work({"n": 1000}, "fwd") == (2000.0, 8000.0)


class StandInExtension:
    """What the compiled binding does, on the CPU: write y in place (or, if `lazy`, forget to)."""

    def __init__(self, lazy=False):
        self.lazy = lazy

    def scale(self, x, alpha, beta, y):
        if not self.lazy:
            torch.add(x * alpha, beta, out=y)


@pytest.mark.parametrize("subject, passes", [("torch-scale", True), ("scale", True), ("lazy", False)])
def test_the_correctness_gate_on_cpu(scale, subject, passes):
    inputs, _, reference = case_data(scale, Case("scale", (("n", 4096),)), seed=3, device="cpu")
    if subject == "torch-scale":
        op = scale.baseline(subject).make()
    else:
        op = scale.variant("scale").bind(StandInExtension(lazy=subject == "lazy"))
    check = check_workload(make_workload(op, inputs, "fwd"), reference, scale.tolerance)
    assert check.passed == passes  # an unwritten output stays NaN-poisoned and fails


@pytest.mark.skipif(not shutil.which("nvcc"), reason="needs nvcc")
def test_example_compiles_for_sm_90(scale):
    checks = check_compile(scale, "sm_90")
    assert {c.source.name for c in checks} >= {"scale.cu"}
    for c in checks:
        assert c.ok, f"{c.source}:\n{compiler_errors(c.output)}"
