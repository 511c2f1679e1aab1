"""Plans kept between invocations (engine/plan_cache.py): a run asked again over unchanged kernel folders
runs its earlier plan without importing any spec.py or torch; any change to what planning reads
plans again; a mistake is never kept."""

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from cudabench.engine.plan import RunOptions, plan, planned_run
from cudabench.engine.plan_cache import cached_plan, keep_plan, plan_key
from cudabench.spec.registry import discover

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "my_kernels"

# `cudabench run` in a process of its own, its workers the fake worker and its GPU check passed: what it
# printed, and whether the process imported torch
DRIVER = """
import sys
sys.path.insert(0, {tests!r})
import cudabench.cli.run as run_cli
import cudabench.device
from cudabench.cli.app import app
from cudabench.engine.scheduler import Runner
from cudabench.engine.workers import ProcessWorker
fake = [sys.executable, {fake!r}]
cudabench.device.require_gpu = lambda: None
run_cli.start_runner = lambda options, dirs, settings, *rest: Runner(options, lambda gpu: ProcessWorker(fake), dirs,
                                                                     settings)
try:
    app(sys.argv[1:])
except SystemExit as exc:
    print("exit", exc.code, "torch imported:", "torch" in sys.modules)
"""


def run_in_process(tmp_path, *args, **env):
    code = DRIVER.format(tests=str(ROOT / "tests"), fake=str(ROOT / "tests" / "fake_worker.py"))
    environ = {**os.environ, "CUDABENCH_CACHE": str(tmp_path / "cache"), **env}
    return subprocess.run([sys.executable, "-c", code, "run", *args], capture_output=True, text=True, cwd=ROOT,
                          env=environ, timeout=120)


def test_a_second_run_runs_its_kept_plan_without_importing_torch(tmp_path):
    kernels = tmp_path / "kernels"
    shutil.copytree(EXAMPLES, kernels)
    args = ["--kernels-dir", str(kernels), "-k", "scale", "--shape", "n=1024"]
    first = run_in_process(tmp_path, *args, "--json", str(tmp_path / "a.json"))
    assert "exit 0 torch imported: True" in first.stdout, first.stdout + first.stderr
    second = run_in_process(tmp_path, *args, "--json", str(tmp_path / "b.json"))
    assert "exit 0 torch imported: False" in second.stdout, second.stdout + second.stderr
    a, b = (json.loads((tmp_path / f"{n}.json").read_text()) for n in "ab")
    assert [(r["subject"], r["case"]) for r in a["results"]] == [(r["subject"], r["case"]) for r in b["results"]]
    assert a["source_hashes"] == b["source_hashes"]
    # an edited spec.py is planned again (and imports torch again)
    spec = kernels / "scale" / "spec.py"
    spec.write_text(spec.read_text() + "\n# edited\n")
    third = run_in_process(tmp_path, *args)
    assert "exit 0 torch imported: True" in third.stdout, third.stdout + third.stderr
    # turned off: planned every time
    off = run_in_process(tmp_path, *args, CUDABENCH_PLAN_CACHE="0")
    assert "exit 0 torch imported: True" in off.stdout


def test_a_mistake_is_never_kept(tmp_path):
    for _ in range(2):
        res = run_in_process(tmp_path, "--kernels-dir", str(EXAMPLES), "-k", "scale", "--shape", "n=0")
        assert "exit 2" in res.stdout and "Traceback" not in res.stderr, res.stdout + res.stderr
    assert not list((tmp_path / "cache").glob("plans/*.json"))


def test_a_kept_plan_reads_back_whole(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDABENCH_CACHE", str(tmp_path))
    options = RunOptions(dtypes=("float32",))
    planned = planned_run(plan(discover([EXAMPLES]), ["scale"], {"n": 4096}, options))
    key = plan_key([EXAMPLES], ["scale"], [{"n": 4096}], None, options)
    assert cached_plan(key) is None
    keep_plan(key, planned)
    assert cached_plan(key) == planned and planned.entries and planned.source_hashes
    (tmp_path / "plans" / f"{key}.json").write_text("{not json")
    assert cached_plan(key) is None  # unreadable: planned again


@pytest.mark.parametrize("change", ["kernels", "shape", "shapes", "dtypes", "directions", "baselines", "config", "source",
                                    "environment"])
def test_the_key_changes_with_everything_planning_reads(tmp_path, monkeypatch, change):
    kernels = tmp_path / "kernels"
    shutil.copytree(EXAMPLES, kernels)
    suite = tmp_path / "suite.toml"
    suite.write_text("# a suite\n")
    options = RunOptions()
    args = [[kernels], ["scale"], [{"n": 1024}], suite, options]
    before = plan_key(*args)
    assert plan_key(*args) == before  # the same request, the same key
    if change == "kernels":
        args[1] = ["scale", "scale-v1"]
    elif change == "shape":
        args[2] = [{"n": 2048}]
    elif change == "shapes":  # a second --shape
        args[2] = [{"n": 1024}, {"n": 2048}]
    elif change == "dtypes":
        args[4] = replace(options, dtypes=("bfloat16",))
    elif change == "directions":
        args[4] = replace(options, directions=("fwdbwd",))
    elif change == "baselines":
        args[4] = replace(options, baselines=())
    elif change == "config":
        suite.write_text("# another suite\n")
    elif change == "source":
        source = next(p for p in (kernels / "scale").iterdir() if p.suffix in (".cu", ".cpp"))
        source.write_text(source.read_text() + "\n// edited\n")
    else:
        monkeypatch.setenv("CUDABENCH_NVTX_BACKEND", "torch")
    assert plan_key(*args) != before


def test_the_command_line_starts_without_torch_or_numpy():
    """What every invocation imports before it plans: neither torch (seconds) nor numpy (a third of the
    rest); both come later, in the workers and at the first result's summary."""
    code = "import sys, cudabench.cli.app; print(sorted(m for m in ('numpy', 'torch') if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stdout + result.stderr
