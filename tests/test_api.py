"""cudabench from Python and `run --op`: an op of the user's own package (tests/opbench), named by
import path, becomes a kernel family of its own (cudabench.spec.op_family) that the judge checks
against the user's reference like any family; `cudabench.bench` runs it in workers (stand-ins here)
and returns the records a results file holds; without a GPU, one exception type."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import cudabench
from cudabench.cli.app import app
from cudabench.engine.workers import ProcessWorker
from cudabench.errors import ConfigError
from cudabench.measure.settings import Settings
from cudabench.results.exporters.json_document import load_results
from cudabench.results.records.model import Case
from cudabench.spec.compile_check import binding_command, find_nvcc, nvcc_command
from cudabench.spec.op_family import op_spec, resolve, write_family
from cudabench.spec.registry import discover
from opbench import ops
from runs import inline_judge

FAKE = [sys.executable, str(Path(__file__).parent / "fake_worker.py")]
PATHS = dict(inputs="opbench.bench:make_inputs", reference="opbench.bench:reference")
MY_OPS = Path(__file__).resolve().parents[1] / "examples" / "my_ops"


class ConstantTimer:
    name, batch, last = "sync", 1, None

    def prepare(self, call, estimate):
        pass

    def samples(self, call, count, before_each=None, keep=False):
        out = []
        for _ in range(count):
            self.last = call() if keep else (call(), None)[1]
            out.append(1e-3)
        return out


def judged(tmp_path, op, shape=(("n", 4096),), role="variant", baselines=(), paths=PATHS):
    spec = op_spec(op, shapes=[dict(shape)], baselines=baselines, **paths)
    kernels = write_family(spec, tmp_path)
    registry = discover([kernels])
    family = registry.family(spec.name)
    name = spec.name if role == "variant" else family.baselines[0].name
    settings = Settings(rule={"kind": "repeat", "count": 5}, warmup_calls=1, warmup_seconds=0.0, fuzz=0)
    judge = inline_judge(registry, kernels, {}, lambda timing: ConstantTimer())
    return judge.run(family, Case(spec.name, shape), name, role, settings)


def test_an_op_named_by_import_path_is_checked_against_its_reference(tmp_path):
    honest = judged(tmp_path, "opbench.ops:fused_add")
    assert honest.status == "ok" and honest.check.passed and honest.subject == "fused_add"
    wrong = judged(tmp_path, ops.wrong_add)  # a function, found again by its module and name
    assert wrong.status == "FAIL" and not wrong.check.passed


def test_a_baseline_by_dotted_path_runs_beside_it(tmp_path):
    r = judged(tmp_path, ops.fused_add, role="baseline", baselines=["torch.add"])
    assert r.subject == "torch.add" and r.role == "baseline" and r.status == "ok"


@pytest.mark.parametrize("op, fragment", [
    (lambda a, b: a + b, "cannot be found by another process"),
    ("not a path!", "is not an import path"),
    ("nopkg_anywhere.ops:f", "there is no module nopkg_anywhere here"),
])
def test_an_op_another_process_cannot_import_is_refused_with_one_paragraph(op, fragment):
    with pytest.raises(ConfigError, match=fragment):
        op_spec(op, shapes=[{"n": 8}], **PATHS)


def test_paths_that_do_not_import_say_so():
    with pytest.raises(ConfigError, match="Cannot import opbench.ops:nothing"):
        resolve("opbench.ops:nothing")
    assert resolve("torch.add") is __import__("torch").add


@pytest.mark.parametrize("shapes", [[], [{"n": "8"}], [{}], ["n=8"], [{"n": 8}, {"m": 8}], [{"n": 8}, {"n": 8, "m": 2}]])
def test_bad_shapes_are_refused(shapes):
    with pytest.raises(ConfigError):
        op_spec("opbench.ops:fused_add", shapes=shapes, **PATHS)


def test_a_later_shape_may_leave_out_parameters_of_the_first():
    spec = op_spec("opbench.ops:fused_add", shapes=[{"n": 8, "m": 2}, {"n": 16}], **PATHS)
    assert spec.shapes == ((("n", 8), ("m", 2)), (("n", 16),))


def test_bench_returns_the_records_of_a_results_file(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDABENCH_CACHE", str(tmp_path / "cache"))
    res = cudabench.bench(ops.fused_add, shapes=[{"n": 1024}, {"n": 4096}], baselines=["torch.add"],
                          start_worker=lambda gpu: ProcessWorker(FAKE), **PATHS)
    assert [(r.subject, r.role, r.case.params["n"]) for r in res] == [
        ("fused_add", "variant", 1024), ("torch.add", "baseline", 1024),
        ("fused_add", "variant", 4096), ("torch.add", "baseline", 4096)]
    res.assert_correct()
    res.assert_not_slower_than(res)
    loaded = load_results(res.to_json(tmp_path / "out.json"))
    assert [r["subject"] for r in loaded["results"]] == [r.subject for r in res]
    assert loaded["environment"]["gpu"] == "fake GPU"


def test_assertions_fail_with_the_subjects_and_why(tmp_path, monkeypatch):
    from dataclasses import replace

    from cudabench.results.records.model import Check

    monkeypatch.setenv("CUDABENCH_CACHE", str(tmp_path / "cache"))
    res = cudabench.bench("opbench.ops:fused_add", shapes=[{"n": 1024}], start_worker=lambda gpu: ProcessWorker(FAKE),
                          **PATHS)
    faster = json.loads(json.dumps(res.document()))
    for r in faster["results"]:
        r["measurement"]["samples"] = [s / 2 for s in r["measurement"]["samples"]]
        r["stats"] = {**r["stats"], "median": r["stats"]["median"] / 2}
    with pytest.raises(cudabench.ResultsError, match="regression"):
        res.assert_not_slower_than(faster)
    wrong = cudabench.Results((replace(res.results[0], check=Check((("out", 1.0),), 1e-5)),), res.environment)
    with pytest.raises(cudabench.ResultsError, match="fused_add .*FAIL"):
        wrong.assert_correct()


def test_bench_without_a_gpu_raises_one_exception_type(tmp_path, monkeypatch):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    monkeypatch.setenv("CUDABENCH_CACHE", str(tmp_path / "cache"))
    with pytest.raises(cudabench.NoGPUError, match="No CUDA device") as raised:
        cudabench.bench("opbench.ops:fused_add", shapes=[{"n": 1024}], **PATHS)
    # a script or pytest shows str(error): the hint (what still works here) is part of it
    assert raised.value.hint and str(raised.value) == f"{raised.value.message}\nhint: {raised.value.hint}"


def test_run_op_from_the_command_line(tmp_path, monkeypatch):
    import torch

    monkeypatch.setenv("CUDABENCH_CACHE", str(tmp_path / "cache"))
    base = ["run", "--op", "opbench.ops:fused_add", "--op-inputs", PATHS["inputs"]]
    missing = CliRunner().invoke(app, base + ["--shape", "n=1024"])
    assert missing.exit_code == 2 and "--op needs --op-inputs and --op-reference" in missing.output
    no_shape = CliRunner().invoke(app, base + ["--op-reference", PATHS["reference"]])
    assert no_shape.exit_code == 2 and "--op needs --shape" in no_shape.output
    both = CliRunner().invoke(app, base + ["--op-reference", PATHS["reference"], "-k", "add2", "--shape", "n=8"])
    assert both.exit_code == 2 and "without --kernel" in both.output
    if not torch.cuda.is_available():
        planned = CliRunner().invoke(app, base + ["--op-reference", PATHS["reference"], "--shape", "n=1024",
                                                  "-b", "torch.add", "--no-warm"])
        assert planned.exit_code == 2 and "No CUDA device" in planned.output and "Traceback" not in planned.output


@pytest.mark.parametrize("reference", ["opbench.ops:reference", "opbench.leaky:reference"])
def test_the_judge_never_imports_the_ops_module(tmp_path, monkeypatch, reference):
    """Its inputs and reference may not bring the op's module into the judge's process, not even
    as an import: its code at import time could patch the judge."""
    from cudabench.spec.op_family import family_of

    for name in ("opbench.ops", "opbench.leaky"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    import opbench

    monkeypatch.delattr(opbench, "ops", raising=False)
    family = family_of(op_spec("opbench.ops:fused_add", shapes=[{"n": 8}], inputs=PATHS["inputs"],
                               reference=reference))
    with pytest.raises(ConfigError, match="opbench.ops is the op's module, and the judge's process never imports it"):
        family.reference(a=1, b=2)
    assert "opbench.ops" not in sys.modules
    assert set(family.make_inputs({"n": 8}, __import__("torch").Generator(), "cpu")) == {"a", "b"}


def test_the_readme_examples_baseline_matches_its_reference(tmp_path, monkeypatch):
    """examples/my_ops: what README's "From Python" runs (bench_gelu.py, test_gelu_speed.py). Its op is
    a CUDA extension (a GPU test runs it); the baseline and the fp64 reference are checked here."""
    monkeypatch.syspath_prepend(str(MY_OPS))
    paths = dict(inputs="my_ops.bench:make_inputs", reference="my_ops.bench:reference")
    r = judged(tmp_path, "my_ops.ops:gelu_tanh", role="baseline", baselines=["my_ops.bench:torch_gelu"], paths=paths)
    assert r.status == "ok", (r.subject, r.error, r.skipped, r.check)
    assert "my_ops.ops" not in sys.modules  # the op's module (which builds the extension) was never needed


@pytest.mark.skipif(not shutil.which("nvcc"), reason="needs nvcc")
def test_the_readme_examples_extension_compiles_for_sm_90(tmp_path):
    """gelu.cu with nvcc alone, gelu.cpp's binding against torch's headers: what load() builds."""
    nvcc = find_nvcc()
    commands = [nvcc_command(nvcc, MY_OPS / "my_ops" / "gelu.cu", "sm_90", tmp_path / "gelu.o"),
                binding_command(shutil.which("c++") or "g++", MY_OPS / "my_ops" / "gelu.cpp", tmp_path, nvcc)]
    for command in filter(None, commands):
        done = subprocess.run(command, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "gelu.o").stat().st_size > 0


def test_an_op_named_by_import_path_gets_every_integrity_check(tmp_path):
    """A hostile op that caches its answer by where its inputs live is caught as a family's is."""
    r = judged(tmp_path, "opbench.ops:memo_add")
    assert r.status == "INVALID" and "fresh-output" in r.invalid_because


def test_bench_checks_its_timing_settings_as_the_command_line_does(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDABENCH_CACHE", str(tmp_path / "cache"))
    with pytest.raises(ConfigError, match="timing: expected one of sync, events, graph, cupti"):
        cudabench.bench("opbench.ops:fused_add", shapes=[{"n": 8}], timing="nope", **PATHS)
    with pytest.raises(ConfigError, match="max_time must be positive"):
        cudabench.bench("opbench.ops:fused_add", shapes=[{"n": 8}], max_time=-1.0, **PATHS)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_the_caller_is_sealed_while_its_run_lasts_and_only_then(tmp_path, monkeypatch):
    """The caller holds the pipes to the run's workers: while a subject's code runs, no process of the user
    may open them through /proc (docs/trust.md). It is the user's own process, so it is open again after."""
    from cudabench.engine import sealed as seal_module
    from cudabench.engine.sealed import sealed

    monkeypatch.setenv("CUDABENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CUDABENCH_DEBUG", raising=False)
    seen = []

    class Watched(ProcessWorker):
        def send(self, message):
            seen.append(sealed())
            super().send(message)

    seal_module._set_dumpable(1)  # (a CLI test before this one sealed the test process)
    res = cudabench.bench(ops.fused_add, shapes=[{"n": 1024}], start_worker=lambda gpu: Watched(FAKE), **PATHS)
    res.assert_correct()
    assert seen and all(seen) and not sealed()
