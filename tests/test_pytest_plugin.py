"""The pytest plugin (cudabench/pytest_plugin.py, active through its pytest11 entry point), run by
pytester on the CPU: the `cudabench` fixture benches an op in stand-in workers, its assertions pass
and fail as compare says, a test without a GPU is skipped saying why, and the terminal summary lists
what was measured."""

import sys
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

TESTS = Path(__file__).resolve().parent
CONFTEST = f"""
import sys
import pytest
sys.path.insert(0, {str(TESTS)!r})  # the user's package (tests/opbench)
from cudabench.engine.workers import ProcessWorker

FAKE = [sys.executable, {str(TESTS / "fake_worker.py")!r}]

@pytest.fixture
def stand_in(cudabench):
    cudabench.start_worker = lambda gpu: ProcessWorker(FAKE)
    return cudabench
"""
BENCH = """
PATHS = dict(inputs="opbench.bench:make_inputs", reference="opbench.bench:reference", shapes=[{"n": 1024}])
"""


@pytest.fixture
def suite(pytester, tmp_path, monkeypatch):
    monkeypatch.setenv("CUDABENCH_CACHE", str(tmp_path / "cache"))
    pytester.makeconftest(CONFTEST)
    return pytester


def test_the_fixture_benches_and_the_summary_lists_the_figures(suite, tmp_path):
    suite.makepyfile(BENCH + """
def test_speed(stand_in):
    r = stand_in.bench("opbench.ops:fused_add", baselines=["torch.add"], **PATHS)
    r.assert_correct()
    r.assert_not_slower_than(r)
""")
    result = suite.runpytest_subprocess("--cudabench-json", str(tmp_path / "kept"))
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*= cudabench =*", "*test_speed: fused_add fused_add[[]n=1024]/fwd ok 1.000 ms ±*on fake GPU",
                                 "*test_speed: torch.add fused_add[[]n=1024]/fwd ok*"])
    [kept] = (tmp_path / "kept").iterdir()
    assert "test_speed" in kept.name and '"fused_add"' in kept.read_text()


def test_a_slower_op_fails_the_test_with_the_verdict(suite):
    suite.makepyfile(BENCH + """
import json

def test_speed(stand_in):
    r = stand_in.bench("opbench.ops:fused_add", **PATHS)
    faster = json.loads(json.dumps(r.document()))
    for res in faster["results"]:
        res["measurement"]["samples"] = [s / 2 for s in res["measurement"]["samples"]]
    r.assert_not_slower_than(faster, threshold="5%")
""")
    result = suite.runpytest_subprocess()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*ResultsError: slower than before: regression beyond 5%: fused_add*"])


@pytest.mark.skipif("torch" in sys.modules and __import__("torch").cuda.is_available(), reason="a GPU is here")
def test_without_a_gpu_the_test_is_skipped_and_says_why(suite):
    suite.makepyfile(BENCH + """
def test_speed(cudabench):
    cudabench.bench("opbench.ops:fused_add", **PATHS)
    raise AssertionError("not reached")
""")
    result = suite.runpytest_subprocess("-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*SKIPPED*cudabench: No CUDA device*"])


def test_a_test_compares_with_a_stored_run_of_the_store_it_is_given(suite, tmp_path):
    from cudabench.results.store.database import Store
    from cudabench.results.store.provenance import Provenance
    from synthetic import doc, measured

    store = tmp_path / "results.db"
    older = doc([measured("fused_add", {"n": 1024}, "fused_add", 0.5e-3)])  # half the stand-in's 1 ms
    with Store(store) as opened:
        opened.append(older, Provenance("a" * 40, False), "2026-11-26T00:00:00")
    suite.makepyfile(BENCH + """
def test_speed(stand_in):
    stand_in.bench("opbench.ops:fused_add", **PATHS).assert_not_slower_than("@latest")
""")
    result = suite.runpytest_subprocess("--cudabench-store", str(store))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*slower than before: regression beyond 5%: fused_add*"])


def test_saved_benches_build_the_history_a_later_run_compares_with(suite, tmp_path):
    from cudabench.results.store.database import Store

    store = tmp_path / "results.db"
    suite.makepyfile(BENCH + """
def test_speed(stand_in):
    r = stand_in.bench("opbench.ops:fused_add", **PATHS)
    r.assert_not_slower_than("@latest")  # the run saved by the session before, never this one
""")
    first = suite.runpytest_subprocess("--cudabench-store", str(store), "--cudabench-save")
    first.assert_outcomes(failed=1)  # nothing stored yet to compare with
    first.stdout.fnmatch_lines(["*@latest names a stored run, but there is no results store*"])
    with Store(store, read_only=True) as opened:
        assert len(opened.runs()) == 1  # saved after the test, failed or not
    second = suite.runpytest_subprocess("--cudabench-store", str(store), "--cudabench-save")
    second.assert_outcomes(passed=1)
    with Store(store, read_only=True) as opened:
        assert len(opened.runs()) == 2


EXAMPLE = TESTS.parent / "examples" / "my_ops"


@pytest.mark.skipif("torch" in sys.modules and __import__("torch").cuda.is_available(), reason="a GPU is here")
def test_the_example_packages_own_test_file_is_skipped_without_a_gpu(pytester, monkeypatch, tmp_path):
    """examples/my_ops's CPU part, as a user's CI would run it: its test file skipped with the reason,
    its script one paragraph and a non-zero exit, neither importing the op (whose import builds the
    CUDA extension)."""
    import subprocess

    monkeypatch.setenv("CUDABENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PYTHONPATH", str(EXAMPLE))
    pytester.copy_example(str(EXAMPLE / "test_gelu_speed.py"))
    result = pytester.runpytest_subprocess("-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*SKIPPED*cudabench: No CUDA device*"])
    script = subprocess.run([sys.executable, str(EXAMPLE / "bench_gelu.py")], capture_output=True, text=True,
                            cwd=tmp_path)
    assert script.returncode != 0 and script.stderr.startswith("cudabench: No CUDA device")
    assert "Traceback" not in script.stderr and not (tmp_path / "gelu.json").exists()
