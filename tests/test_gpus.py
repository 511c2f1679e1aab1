"""Several GPUs of one host, on the CPU: nvidia-smi listings and CUDA_VISIBLE_DEVICES, --gpus
parsing, and the scheduler handing subjects to one stand-in worker per fake GPU
(tests/fake_worker.py)."""

import dataclasses
import json
import os
import sys
from pathlib import Path

import pytest

from cudabench.engine.gpus import Gpu, parse_listing, select, visible
from cudabench.engine.plan import RunOptions, Subject, Task, expected_seconds
from cudabench.engine.scheduler import Runner, WorkerStartError
from cudabench.engine.workers import ProcessWorker
from cudabench.errors import ShapeError
from cudabench.measure.stop import FixedCount
from cudabench.results.records.model import Case
from cudabench.spec.family import Variant

FAKE = [sys.executable, str(Path(__file__).parent / "fake_worker.py")]
LISTING = """0, NVIDIA H200, GPU-aaaa-0000
1, NVIDIA H200, GPU-bbbb-1111
2, NVIDIA A100-SXM4-80GB, GPU-cccc-2222
"""
H200_0, H200_1, A100 = parse_listing(LISTING)


def test_nvidia_smi_listing_and_visible_devices():
    assert H200_0 == Gpu(0, "NVIDIA H200", "GPU-aaaa-0000") and A100.name == "NVIDIA A100-SXM4-80GB"
    gpus = [H200_0, H200_1, A100]
    assert visible(gpus, None) == gpus
    assert visible(gpus, "2,0") == [A100, H200_0]           # CUDA's order is the variable's
    assert visible(gpus, "GPU-bbbb") == [H200_1]             # a UUID prefix
    assert visible(gpus, "0,7,1") == [H200_0]                # CUDA stops at the first unknown entry
    assert visible(gpus, "") == []
    assert H200_1.env() == {"CUDA_VISIBLE_DEVICES": "GPU-bbbb-1111", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def test_gpus_option_selects_by_nvml_index():
    gpus = [H200_0, A100]  # GPU 1 hidden by CUDA_VISIBLE_DEVICES
    assert select("all", gpus) == gpus
    assert select(" 2,0,2 ", gpus) == [A100, H200_0]
    with pytest.raises(ShapeError, match="'1' is not a GPU index here") as caught:
        select("0,1", gpus)
    assert "Visible GPUs: 0, 2" in caught.value.hint
    with pytest.raises(ShapeError, match="no GPU is visible"):
        select("all", [])


def fake_gpu_worker(gpu, fail=()):
    env = {**os.environ, **gpu.env(), "FAKE_GPU_NAME": gpu.name}
    if gpu.index in fail:
        env["FAKE_FAIL_START"] = "1"
    return ProcessWorker(FAKE, env=env)


def tasks(registry, per_case):
    """One task per list of names, each at its own add2 case."""
    family = registry.family("add2")
    return [Task(family, (Case("add2", (("n", 64 * (i + 1)),)),), tuple(Variant(n, "fake", bind=lambda e: None)
                                                                     for n in names), ())
            for i, names in enumerate(per_case)]


def run(registry, gpus, per_case, **kw):
    with Runner(RunOptions(rule=FixedCount(3), timeout=20.0), lambda g: fake_gpu_worker(g, **kw), gpus=gpus) as r:
        return r.run(tasks(registry, per_case)), r


def test_subjects_spread_over_every_gpu_and_come_back_in_plan_order(registry):
    results, runner = run(registry, [H200_0, H200_1], [["sleep-0.3", "a1", "a2"], ["sleep-0.2", "b1", "b2"]])
    assert [r.subject for r in results] == ["sleep-0.3", "a1", "a2", "sleep-0.2", "b1", "b2"]
    assert all(r.status == "ok" for r in results)
    assert {r.gpu_uuid for r in results} == {"GPU-aaaa-0000", "GPU-bbbb-1111"}  # both GPUs worked
    assert runner.workers_started == 2


def test_the_subjects_of_one_case_run_on_one_gpu_model(registry):
    names = [[f"s{c}{i}" for i in range(5)] for c in range(4)]
    results, _ = run(registry, [H200_0, A100, H200_1], names)
    for case_results in (results[i:i + 5] for i in range(0, 20, 5)):
        assert len({r.gpu for r in case_results}) == 1, [(r.subject, r.gpu) for r in case_results]
    assert len(results) == 20


def test_a_lost_worker_costs_one_subject_on_one_gpu(registry):
    results, runner = run(registry, [H200_0, H200_1], [["a", "exit", "b", "segv", "c", "d"]])
    status = {r.subject: r.status for r in results}
    assert status == {"a": "ok", "exit": "ERROR", "b": "ok", "segv": "ERROR", "c": "ok", "d": "ok"}
    lost = [r for r in results if r.status == "ERROR"]
    assert all(r.gpu == "NVIDIA H200" and r.gpu_uuid.startswith("GPU-") for r in lost)  # where it was lost
    assert runner.workers_started >= 3


def test_a_gpu_that_cannot_start_leaves_the_work_to_the_others(registry):
    results, _ = run(registry, [H200_0, H200_1], [["a", "b", "c"]], fail=(1,))
    assert [(r.subject, r.status, r.gpu_uuid) for r in results] == [
        ("a", "ok", "GPU-aaaa-0000"), ("b", "ok", "GPU-aaaa-0000"), ("c", "ok", "GPU-aaaa-0000")]
    with pytest.raises(WorkerStartError, match="no CUDA device"):
        run(registry, [H200_0, H200_1], [["a"]], fail=(0, 1))


def test_a_subject_given_back_by_a_gpu_that_failed_after_the_others_left_runs_on_one_that_works(registry, tmp_path,
                                                                                                monkeypatch):
    """One lane's worker dies on a subject (at 0.5 s) and cannot start again (a second later); it took the last
    subject meanwhile and gives it back, after the other lane (busy until 0.8 s) found the queue empty and left. That subject runs on
    the GPU that still works, not recorded as 'no worker could start'."""
    monkeypatch.setenv("FAKE_NO_RESTART", str(tmp_path / "gone"))
    results, _ = run(registry, [H200_0, H200_1], [["exit-for-good", "sleep-0.8", "last"]])
    status = {r.subject: (r.status, r.error or "") for r in results}
    assert status["exit-for-good"][0] == "ERROR" and status["sleep-0.8"] == ("ok", "")
    assert status["last"] == ("ok", ""), status["last"]


def test_longest_expected_first(registry):
    family = registry.family("timex")
    small, large = (Case("timex", (("B", b), ("C", 64), ("T", 256)), "fwdbwd") for b in (2, 32))
    assert expected_seconds(Subject(family, large, "x", "variant")) > expected_seconds(Subject(family, small, "x",
                                                                                              "variant"))


def test_a_subject_that_took_longest_last_time_starts_first_next_time(registry):
    """The plan's guess is the same for every subject of a case; what each took is kept between runs."""
    from cudabench.engine.durations import Durations, durations_file, run_context
    from cudabench.engine.plan import planned_run

    names = [["a", "b", "sleep-0.4", "c"]]
    first = [s.name for _, s in Durations().ranked(enumerate(planned_run(tasks(registry, names)).entries))]
    assert first[0] == "a"  # nothing known yet: equal guesses, plan order
    _, runner = run(registry, [H200_0, H200_1], names)
    context = run_context(runner.options)
    assert json.loads(durations_file().read_text())[f"{context}|add2[n=64]/fwd|variant|sleep-0.4"] == 0.4
    ranked = [s.name for _, s in Durations(context).ranked(enumerate(planned_run(tasks(registry, names)).entries))]
    assert ranked[0] == "sleep-0.4"
    other = run_context(dataclasses.replace(runner.options, integrity=False))
    assert other != context  # a run of other settings keeps its own records
    assert [s.name for _, s in Durations(other).ranked(enumerate(planned_run(tasks(registry, names)).entries))][0] == "a"
    durations_file().write_text("{not json")  # a broken file is only a lost guess
    assert len(Durations().ranked(enumerate(planned_run(tasks(registry, names)).entries))) == 4


def test_the_run_starts_on_whichever_gpu_can_start(registry):
    with Runner(RunOptions(rule=FixedCount(3), timeout=20.0), lambda g: fake_gpu_worker(g, fail=(0,)),
                gpus=[H200_0, H200_1]) as runner:
        runner.start()  # GPU 0 cannot start: GPU 1 carries the run
        results = runner.run(tasks(registry, [["a", "b"]]))
    assert [(r.subject, r.status, r.gpu_uuid) for r in results] == [("a", "ok", "GPU-bbbb-1111"),
                                                                    ("b", "ok", "GPU-bbbb-1111")]


def test_a_subject_taken_by_a_gpu_that_then_cannot_restart_goes_to_another(registry):
    starts = {0: 0, 1: 0}

    def start(gpu):  # a GPU's worker starts once; the one that crashes cannot start again
        starts[gpu.index] += 1
        return fake_gpu_worker(gpu, fail=(gpu.index,) if starts[gpu.index] > 1 else ())

    names = ["sleep-0.3", "exit", *(f"s{i}" for i in range(6))]
    with Runner(RunOptions(rule=FixedCount(3), timeout=20.0), start, gpus=[H200_0, H200_1]) as runner:
        results = runner.run(tasks(registry, [names]))
    assert [r.subject for r in results] == names  # every subject recorded, none lost with GPU 0
    assert all(r.status == "ok" for r in results if r.subject != "exit")


def test_a_subject_never_run_is_guessed_in_the_recorded_subjects_units(registry):
    """A new subject's guess (one call's time) is scaled as the recorded ones compare with theirs, so it
    does not wait behind every recorded subject; a cache that cannot be written costs only the record."""
    from cudabench.engine import durations
    from cudabench.engine.durations import Durations
    from cudabench.engine.plan import planned_run
    from cudabench.errors import ConfigError

    entries = list(enumerate(planned_run(tasks(registry, [["old"], ["new"]])).entries))
    (_, old), (_, new) = entries
    record = Durations()
    record.known = {record.key(old): 1000 * old.expected_seconds}  # 1000x its guess
    ranked = [s.name for _, s in record.ranked(entries)]
    assert ranked == ["new", "old"]  # new's guess is larger: scaled by the same 1000, it goes first

    def unwritable(path, text):
        raise ConfigError("cannot write")

    record.took = {record.key(old): 1.0}
    original = durations.write_text_atomic
    durations.write_text_atomic = unwritable
    try:
        record.save()  # no error: the run's results matter, not this record
    finally:
        durations.write_text_atomic = original
