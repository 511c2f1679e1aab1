"""The run logic end to end on the CPU, with baselines only and a fake timer: planning, the
check, results, the JSON written after every result, and an interrupted run keeping its results."""

import json
from dataclasses import replace

import pytest
from rich.console import Console

from cudabench.results import units
from cudabench.results.report import lesson_tables, terminal as report
from cudabench.device import environment
from cudabench.errors import ShapeError
from cudabench.results.exporters.json_document import SCHEMA_VERSION, document, write_json_atomic
from cudabench.measure.loop import Warmup
from cudabench.measure.stop import FixedCount
from cudabench.engine.plan import RunOptions, plan
from fakes import FakeTimer
from runs import inline_runner


def cpu_run(registry, names, shape, on_result=lambda r: None, **kw):
    options = RunOptions(rule=FixedCount(5), warmup=Warmup(1, 0), **kw)
    tasks = [replace(t, variants=()) for t in plan(registry, names, shape, options)]  # no CUDA builds
    runner = inline_runner(options, timer_factory=lambda name: FakeTimer(), on_result=on_result)
    return runner, runner.run(tasks)


def test_baseline_is_checked_then_timed_in_every_direction(registry):
    _, results = cpu_run(registry, ["timex"], {"B": 8, "C": 3, "T": 8}, directions=("fwd", "bwd", "fwdbwd"))
    assert [(r.subject, r.case.direction) for r in results] == [
        ("conv1d", "fwd"), ("conv1d", "bwd"), ("conv1d", "fwdbwd")]
    for r in results:
        assert r.status == "ok" and r.check.passed and r.stats.n == 5 and r.flops > 0
    assert set(dict(results[2].check.errors)) == {"out", "gw", "gk"}


def test_implied_variants_that_cannot_run_are_skipped_with_the_reason(registry):
    options = RunOptions()
    task = plan(registry, ["timex"], {"T": 66}, options)[0]
    assert [v.name for v in task.variants] == ["timex-v1", "timex-v2", "timex-fft", "timex-mma"]
    assert {v.name: why for v, why in task.skipped}["timex-v3"].startswith("T must be a multiple of 4")
    with pytest.raises(ShapeError):
        plan(registry, ["timex-v3"], {"T": 66}, options)  # named explicitly: an error


def test_results_are_written_after_each_one_and_survive_an_interrupt(registry, tmp_path):
    path = tmp_path / "r.json"
    env = environment()
    seen = []

    def save(result):
        seen.append(result)
        write_json_atomic(path, document(seen, env, "cudabench run ..."))
        if len(seen) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cpu_run(registry, ["timex"], {"B": 8, "C": 3, "T": 8}, on_result=save, directions=("fwd", "bwd", "fwdbwd"))
    doc = json.loads(path.read_text())
    assert doc["schema_version"] == SCHEMA_VERSION and len(doc["results"]) == 2
    first = doc["results"][0]
    assert first["measurement"]["samples"] == pytest.approx([1e-6, 2e-6, 3e-6, 4e-6, 5e-6])
    assert first["check"]["passed"] and first["stats"]["median"] == pytest.approx(3e-6)
    assert not list(tmp_path.glob(".r.json.*"))  # no temporary files left behind


def test_nan_is_written_as_valid_json(tmp_path):
    write_json_atomic(tmp_path / "x.json", {"e": float("nan"), "l": [float("inf")]})
    assert json.loads((tmp_path / "x.json").read_text()) == {"e": "nan", "l": ["inf"]}


def test_tables_render_with_speedup_and_skips(registry):
    _, results = cpu_run(registry, ["add2"], {"n": 64})
    console = Console(record=True, width=150)
    for table in report.tables(results):
        console.print(table)
    text = console.export_text()
    assert "torch-add" in text and "1.00×" in text and "add2  n=64" in text


@pytest.mark.parametrize("seconds, text", [(2.5e-6, "2.50 µs"), (4.5e-4, "450.0 µs"), (4.47e-3, "4.470 ms"),
                                           (37.5e-3, "37.50 ms"), (1.5, "1.500 s"), (None, "-")])
def test_time_format(seconds, text):
    assert units.fmt_time(seconds) == text


def test_bars():
    assert lesson_tables.bar(1.0, 1.0, width=4) == "████"
    assert lesson_tables.bar(0.5, 1.0, width=4) == "██"
    assert lesson_tables.bar(0.0, 1.0) == "▏"


def test_record_as_files_a_subject_under_another_name(registry):
    _, results = cpu_run(registry, ["add2"], {"n": 64}, renames={"torch-add": "add2-old"})
    assert [r.subject for r in results] == ["add2-old"]


def test_an_invalid_subject_shows_no_figure_and_enters_no_speedup():
    from synthetic import measured

    from cudabench.results.records.model import IntegrityCheck

    shape = {"n": 64}
    cheat = replace(measured("add2", shape, "add2", 1e-9),
                    integrity=(IntegrityCheck("no-work", "fail", "no GPU activity in 10 of 10 calls"),))
    honest = measured("add2", shape, "add2-vec4", 2e-6)
    base = measured("add2", shape, "torch-add", 4e-6, role="baseline")
    console = Console(record=True, width=200)
    for table in report.tables([cheat, honest, base]):
        console.print(table)
    text = console.export_text()
    assert "INVALID" in text and "2.00×" in text  # the honest variant's speedup
    assert "4000.00×" not in text  # the cheat's would-be speedup is never shown
    notes = report.notes([cheat, honest, base])
    assert any(n.startswith("INVALID add2 fwd") and "no-work: no GPU activity" in n for n in notes)


def test_each_result_says_where_its_time_went_and_the_breakdown_adds_up(registry):
    from cudabench.measure.subject import INTEGRITY_PARTS, PHASES
    from cudabench.results.exporters.json_document import result_from_dict, result_to_dict
    from cudabench.results.records.model import RunTime

    runner, results = cpu_run(registry, ["add2"], {"n": 64})
    timed = [r for r in results if r.measurement is not None]
    assert timed
    for r in timed:
        phases = dict(r.phases)
        assert {"inputs", "reference", "check", "warm-up", "sampling"} <= set(phases)
        assert {"integrity/judged calls", "integrity/shapes"} <= set(phases)
        assert set(phases) <= set(PHASES) | {f"integrity/{p}" for p in INTEGRITY_PARTS}
        assert all(seconds >= 0 for seconds in phases.values())
        assert result_from_dict(result_to_dict(r)).phases == r.phases
    spent = sum(s for r in results for _, s in r.phases)
    line = report.time_breakdown(results, RunTime(spent + 1.0, 1, (("start-up", 0.5), ("build", 0.0))))
    assert line.startswith(f"time: {spent + 1.0:.1f} s wall") and "start-up 0.5 s" in line
    assert line.endswith("other 0.5 s") and "timed sampling" in line
    from dataclasses import replace

    parts = replace(timed[0], phases=(("sampling", 1.0), ("integrity", 0.25), ("integrity/judged calls", 0.5),
                                      ("integrity/shapes", 0.25)))
    line = report.time_breakdown([parts], RunTime(2.0))
    assert "sampling 1.0 s, integrity 1.0 s (judged calls 0.5, shapes 0.2, rest 0.2), other 0.0 s" in line


def test_a_phase_inside_another_is_taken_out_of_it(monkeypatch):
    import cudabench.measure.subject as subject

    clock = iter([0.0, 1.0, 3.0, 10.0])
    monkeypatch.setattr(subject.time, "perf_counter", lambda: next(clock))
    phases = subject.Phases(lambda: None)
    with phases("integrity"):
        with phases("integrity/shapes"):
            pass
    assert phases.seconds == {"integrity/shapes": 2.0, "integrity": 8.0}


def test_tables_are_grouped_per_gpu_model_and_skips_join_their_case():
    from dataclasses import replace

    from synthetic import measured, skipped

    shape = {"B": 32, "C": 768, "T": 768}
    results = [replace(measured("timex", shape, "timex-v4", 1e-3), gpu="NVIDIA H200"),
               skipped("timex", shape, "timex-v3"),
               replace(measured("timex", {"B": 8, "C": 768, "T": 768}, "timex-v4", 1e-3), gpu="NVIDIA A100"),
               replace(measured("timex", shape, "conv1d", 4e-3, role="baseline"), gpu="NVIDIA H200")]
    made = report.tables(results)
    assert [t.title for t in made] == ["timex  B=32,C=768,T=768  float32  on NVIDIA H200",
                                       "timex  B=8,C=768,T=768  float32  on NVIDIA A100"]
    assert made[0].row_count == 3  # the skip sits with its case, on the model the case ran on
    one_model = report.tables([replace(r, gpu="NVIDIA H200") for r in results[:2]])
    assert [t.title for t in one_model] == ["timex  B=32,C=768,T=768  float32"]


def test_the_results_file_keeps_where_the_run_time_went(registry, tmp_path):
    """The time line is in the results file too (scale reports read it there, `show` prints it)."""
    import json

    from cudabench.cli.run import execute
    from cudabench.cli.run_outputs import Outputs
    from cudabench.engine.plan import planned_run
    from cudabench.engine.suite_file import TimingPolicy

    options = RunOptions(rule=FixedCount(5), warmup=Warmup(1, 0))
    tasks = [replace(t, variants=()) for t in plan(registry, ["add2"], {"n": 64}, options)]
    runner = inline_runner(options, timer_factory=lambda name: FakeTimer())
    out = tmp_path / "r.json"
    execute(runner, planned_run(tasks), Outputs(out, None, None), "cudabench run -k add2",
            TimingPolicy(timing="sync", cold=False))
    doc = json.loads(out.read_text())
    assert doc["complete"] is True and doc["run_time"]["gpus"] == 1 and doc["run_time"]["wall"] > 0
    assert set(doc["run_time"]["waited"]) == {"start-up", "build"}  # pairs are written as an object


def test_results_are_saved_in_the_background_and_coalesced():
    """A lane hands its result in and goes on while the files are rewritten; results that come in
    during a save go into one next save; close waits for the save in progress; a failed save is kept
    for the final one to report."""
    import threading
    import time as clock

    from cudabench.cli.run_outputs import BackgroundSaver

    inside, release, saves = threading.Event(), threading.Event(), []

    def save():
        saves.append(len(saves))
        inside.set()
        assert release.wait(10)

    saver = BackgroundSaver(save)
    saver.changed()
    assert inside.wait(10)          # the first save is under way, and blocked
    for _ in range(5):
        saver.changed()             # returns at once: no lane waits for a save
    assert saves == [0]
    inside.clear()
    release.set()                   # the first ends; the five changes make one more save
    assert inside.wait(10)
    saver.close()                   # waits for what is in progress; nothing was asked since
    assert saves == [0, 1]

    def full():
        raise OSError("disk full")

    failing = BackgroundSaver(full)
    failing.changed()
    end = clock.monotonic() + 10
    while failing.error is None and clock.monotonic() < end:
        clock.sleep(0.01)
    failing.close()
    assert isinstance(failing.error, OSError)
