"""Issue 32 on the GPU: cudabench.bench, `run --op` and the pytest plugin over a user's op
(tests/opbench, and examples/my_ops's CUDA extension built by torch's load()), in real workers. A correct op
passes, a wrong op fails with its error, a hostile op is INVALID, a slower build of the same op fails
assert_not_slower_than, and the results file holds the clocks of each batch of samples.

    python3 -m pytest -m gpu -rA tests/gpu/test_api_gpu.py"""

import json
import os
import shutil
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

import cudabench
from cudabench.cli.app import app

pytestmark = pytest.mark.gpu
pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
PATHS = dict(inputs="opbench.bench:make_inputs", reference="opbench.bench:reference")
SHAPE = {"n": 1 << 22}


@pytest.fixture(autouse=True)
def gpu(monkeypatch, tmp_path):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    monkeypatch.setenv("CUDABENCH_CACHE", str(tmp_path / "cache"))
    importable(monkeypatch, TESTS)


def importable(monkeypatch, folder):
    """`folder`'s packages importable here and in the workers (they inherit PYTHONPATH)."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.syspath_prepend(str(folder))
    for name in ("opbench", "opbench.ops", "opbench.bench"):
        monkeypatch.delitem(__import__("sys").modules, name, raising=False)


def bench(op, **kw):
    return cudabench.bench(op, shapes=[SHAPE], warm=False, **PATHS, **kw)


def test_a_correct_op_passes_beside_its_baseline_and_records_clocks_per_batch():
    r = bench("opbench.ops:fused_add", baselines=["torch.add"])
    r.assert_correct()
    assert {x.status for x in r} == {"ok"} and len(r) == 2
    assert all(x.measurement.sample_clocks for x in r)


def test_a_wrong_op_fails_with_its_error():
    r = bench("opbench.ops:wrong_add")
    with pytest.raises(cudabench.ResultsError, match="wrong_add .*FAIL"):
        r.assert_correct()


def test_a_hostile_op_is_invalid():
    [r] = list(bench("opbench.ops:memo_add"))
    assert r.status == "INVALID", r


def test_a_slower_build_of_the_same_op_fails_assert_not_slower_than(tmp_path, monkeypatch):
    fast = bench("opbench.ops:fused_add")
    slow_pkg = tmp_path / "slow" / "opbench"
    shutil.copytree(TESTS / "opbench", slow_pkg)
    (slow_pkg / "ops.py").write_text(textwrap.dedent('''
        def fused_add(a, b):  # the same op, built worse: ten extra passes over its inputs
            for _ in range(10):
                a + b
            return a + b
    '''))
    importable(monkeypatch, tmp_path / "slow")
    slow = bench("opbench.ops:fused_add")
    slow.assert_correct()
    with pytest.raises(cudabench.ResultsError, match="slower than before"):
        slow.assert_not_slower_than(fast)
    fast.assert_not_slower_than(fast)


def test_run_op_from_the_command_line_writes_the_results_file(tmp_path):
    out = tmp_path / "op.json"
    res = CliRunner().invoke(app, ["run", "--op", "opbench.ops:fused_add", "--op-inputs", PATHS["inputs"],
                                   "--op-reference", PATHS["reference"], "--shape", "n=4194304",
                                   "-b", "torch.add", "--no-warm", "--json", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    assert {r["status"] for r in doc["results"]} == {"ok"}
    assert all(r["measurement"]["sample_clocks"] for r in doc["results"])


def test_the_example_packages_pytest_file_passes_with_the_plugin(pytester, monkeypatch):
    importable(monkeypatch, ROOT / "examples" / "my_ops")
    pytester.copy_example(str(ROOT / "examples" / "my_ops" / "test_gelu_speed.py"))
    result = pytester.runpytest_subprocess("-rA", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "cudabench" in result.stdout.str()
