"""Baselines kept from an earlier run (run --baselines-from, watch's later turns): which results are
kept, which are measured again, and that a kept result is recorded as it was, marked, and not run."""

import hashlib
import json
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from cudabench.cli.app import app
from cudabench.cli.run import earlier_results
from cudabench.device import environment
from cudabench.engine.kept import KEY, baselines_key, is_kept, kept_results, read_earlier
from cudabench.engine.plan import RunOptions, plan, planned_run
from cudabench.measure.loop import Warmup
from cudabench.measure.stop import FixedCount
from cudabench.results.exporters.json_document import check_document, document
from cudabench.results.records.codec import to_data
from fakes import FakeTimer
from runs import inline_runner

SHAPE = {"B": 8, "C": 3, "T": 8}


def _planned(registry, variants=False):
    options = RunOptions(rule=FixedCount(5), warmup=Warmup(1, 0), directions=("fwd", "fwdbwd"))
    tasks = plan(registry, ["timex-v1"] if variants else ["timex"], SHAPE, options)
    return options, planned_run(tasks if variants else [replace(t, variants=()) for t in tasks])


@pytest.fixture
def earlier(registry):
    """A run of the conv1d baseline on the CPU, as its results file reads back."""
    options, planned = _planned(registry)
    runner = inline_runner(options, timer_factory=lambda name: FakeTimer())
    results = [replace(r, gpu_uuid="GPU-1") for r in runner.run(planned)]
    env = replace(environment(), gpu_uuid="GPU-1", driver="580", torch="2.11", settings=(("timing", "sync"), (KEY, "k1")))
    doc = document(results, env, "cudabench run", 1, dict(planned.source_hashes))
    return check_document(json.loads(json.dumps(doc)), "earlier.json"), to_data(env), planned


def test_a_baseline_measured_on_the_same_gpu_torch_sources_and_settings_is_kept(earlier):
    doc, env, planned = earlier
    kept = kept_results(planned.entries, env, doc)
    assert sorted(kept) == [0, 1] and all(r.subject == "conv1d" and is_kept(r) and r.phases == () for r in kept.values())
    assert [r.case.direction for r in kept.values()] == ["fwd", "fwdbwd"]
    assert kept[0].measurement.samples == tuple(doc["results"][0]["measurement"]["samples"])


@pytest.mark.parametrize("change", ["gpu_uuid", "driver", "torch", "cudabench", "timing", KEY])
def test_anything_else_in_the_environment_or_settings_measures_it_again(earlier, change):
    doc, env, planned = earlier
    if change in ("timing", KEY):
        other = {**env, "settings": {**env["settings"], change: "other"}}
    else:
        other = {**env, change: "other"}
    assert kept_results(planned.entries, other, doc) == {}
    unknown = {**env, "gpu_uuid": ""}  # a GPU of unknown UUID is no GPU to match
    assert kept_results(planned.entries, unknown, {**doc, "environment": unknown}) == {}


def test_the_key_covers_the_options_and_the_python_files_of_the_kernels_folders(tmp_path):
    (tmp_path / "fam").mkdir()
    spec = tmp_path / "fam" / "spec.py"
    spec.write_text("x = 1\n")
    (tmp_path / "fam" / "fam.cu").write_text("// a\n")
    options = RunOptions()
    key = baselines_key(options, [tmp_path])
    (tmp_path / "fam" / "fam.cu").write_text("// an edit of the kernel\n")
    assert baselines_key(options, [tmp_path]) == key  # CUDA sources: the baselines do not run them
    spec.write_text("x = 2\n")
    assert baselines_key(options, [tmp_path]) != key  # spec.py defines the baselines
    assert baselines_key(replace(options, rule=FixedCount(3)), [tmp_path]) != baselines_key(options, [tmp_path])
    assert baselines_key(replace(options, warmup=Warmup(3, 0.1)), [tmp_path]) != baselines_key(options, [tmp_path])


def test_a_failed_result_another_gpus_or_another_case_is_measured_again(earlier, registry):
    doc, env, planned = earlier
    failed = json.loads(json.dumps(doc))
    failed["results"][0]["status"] = "FAIL"
    assert sorted(kept_results(planned.entries, env, failed)) == [1]
    elsewhere = json.loads(json.dumps(doc))
    elsewhere["results"][1]["gpu_uuid"] = "GPU-2"  # a run over several GPUs: measured on another one
    assert sorted(kept_results(planned.entries, env, elsewhere)) == [0]
    options = RunOptions(directions=("fwd",))
    other_shape = planned_run([replace(t, variants=()) for t in plan(registry, ["timex"], {"B": 8, "C": 3, "T": 12}, options)])
    assert kept_results(other_shape.entries, env, doc) == {}


def test_a_variant_is_never_kept(earlier, registry):
    doc, env, _ = earlier
    as_variant = json.loads(json.dumps(doc))
    for r in as_variant["results"]:
        r["role"], r["subject"] = "variant", "timex-v1"
    _, planned = _planned(registry, variants=True)
    kept = kept_results(planned.entries, env, as_variant)
    assert all(planned.entries[p].role == "baseline" for p in kept)


def test_the_runner_records_a_kept_result_as_it_is_and_runs_the_rest(earlier):
    doc, env, planned = earlier
    kept = {0: kept_results(planned.entries, env, doc)[0]}
    ran = []
    options = RunOptions(rule=FixedCount(5), warmup=Warmup(1, 0), directions=("fwd", "fwdbwd"))
    runner = inline_runner(options, timer_factory=lambda name: FakeTimer(), on_result=ran.append)
    results = runner.run(planned, kept)
    assert results[0] is kept[0] and not is_kept(results[1]) and results[1].phases
    assert [r.case.direction for r in results] == ["fwd", "fwdbwd"] and len(ran) == 2


def test_a_file_that_is_not_results_is_one_clear_error_and_a_changed_one_keeps_nothing(tmp_path, earlier):
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    res = CliRunner().invoke(app, ["run", "-k", "add2", "--baselines-from", str(bad)])
    assert res.exit_code != 0 and "not a cudabench results file" in res.output and "Traceback" not in res.output
    good = tmp_path / "good.json"
    good.write_text(json.dumps(earlier[0]))
    digest = hashlib.sha256(good.read_bytes()).hexdigest()
    assert read_earlier(good, digest)[0]["results"] and read_earlier(good, None)[1] == ""
    good.write_text(json.dumps(earlier[0]) + " ")  # changed after its run wrote it
    assert read_earlier(good, digest) == (None, "it changed on disk after its run wrote it")
    res = CliRunner().invoke(app, ["run", "-k", "add2", "--baselines-from", str(good), "--baselines-digest", digest])
    assert "nothing kept (it changed on disk" in res.output and "Traceback" not in res.output
    good.write_text(json.dumps(earlier[0]))
    assert earlier_results(good, None, None, None) is not None
    assert earlier_results(good, None, "tcp://head:8786", None) is None  # a cluster's GPUs are not this one
    assert earlier_results(good, None, None, "mypkg.ops:f") is None      # an op's baselines: the user's code
