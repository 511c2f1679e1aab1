"""The scale tables of issue 33 (.ci/scale_report.py) from results files and run logs."""

import importlib.util
import json
import sys

import pytest
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / ".ci" / "scale_report.py"


def script():
    spec = importlib.util.spec_from_file_location("scale_report", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["scale_report"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def result(subject, key, median, gpu, seconds=1.0):
    return {"subject": subject, "case": {"key": key}, "status": "ok", "stats": {"median": median},
            "host": "h", "gpu_index": gpu, "phases": [["sampling", seconds / 2], ["integrity", seconds / 2]]}


def write_run(folder, name, results, wall, gpus=1):
    (folder / f"{name}.json").write_text(json.dumps({"results": results}))
    # the time line as the terminal wraps it (at a space), with a parenthesised sub-split; on several
    # GPUs it splits the GPU-seconds
    split = {k: v * gpus for k, v in (("start-up", 1.0), ("build", 0.5), ("sampling", 5.0), ("other", 2.5))}
    head = (f"time: {wall} s wall, 20% of it timed sampling" if gpus == 1 else
            f"time: {wall} s wall on {gpus} GPUs ({wall * gpus} GPU-seconds), 20% of them timed sampling")
    (folder / f"scale-{name}.log").write_text(
        f"the kernel ran in time: no\n\n{head} — start-up {split['start-up']} s, build {split['build']} s, "
        f"sampling \n{split['sampling']} s (judged 1.0 s), other {split['other']} s\n\nend\n")


def test_speedup_goal_per_gpu_counts_and_medians_against_the_one_gpu_runs(tmp_path):
    one = [result("a", "k1", 100e-6, 0), result("b", "k1", 200e-6, 0, seconds=3.0)]
    write_run(tmp_path, "timex-sweep-one-1", one, 40.0)
    # the slower one-GPU run is not the one compared with
    write_run(tmp_path, "timex-sweep-one-2", [result("a", "k1", 102e-6, 0), result("b", "k1", 200e-6, 0)], 44.0)
    skipped = {"subject": "c", "case": {"key": "k2"}, "status": "SKIP", "gpu_index": -1, "phases": []}
    write_run(tmp_path, "timex-sweep-all-1", [result("a", "k1", 101e-6, 0), result("b", "k1", 260e-6, 1, 3.0),
                                              skipped], 11.0, gpus=4)
    write_run(tmp_path, "timex-sweep-all-2", [result("a", "k1", 101e-6, 2), result("b", "k1", 201e-6, 3)], 20.0,
              gpus=4)
    s = script()
    runs = s.load(tmp_path)["timex-sweep"]
    assert [r.name for r in runs] == ["one-1", "one-2", "all-1", "all-2"]
    per_gpu = {"start-up": 1.0, "build": 0.5, "sampling": 5.0, "other": 2.5}
    assert runs[0].wall == 40.0 and runs[0].phases == per_gpu  # not the earlier line that says "time: "
    assert runs[2].wall == 11.0 and runs[2].phases == per_gpu  # 4 GPUs' GPU-seconds, per GPU
    text = s.report("timex-sweep", runs, gpus=4)
    speed, _, bounds = text.partition("What bounded")
    rows = {line.split(" | ")[0].strip("| "): line for line in speed.splitlines() if line.startswith("| ")}
    assert "3.64×" in rows["all-1"] and "| met |" in rows["all-1"]       # 40 / 11 >= 0.9 * 4
    assert "| 3.90× |" in rows["all-1"]                                    # 39 / 10: start-up taken out
    assert "2.00×" in rows["all-2"] and "not met" in rows["all-2"]
    assert "h:0 1, h:1 1 |" in rows["all-1"] and "h:2 1, h:3 1" in rows["all-2"]  # a skip ran on no GPU
    assert "| 2 / 2 |" in rows["all-1"]  # ok out of those that ran: a skip is neither
    assert "15.0% / 30.0%" in rows["all-1"]                                # b: 260 against the one-GPU mean 200
    assert "spread of the one-GPU runs" in text and "1.0% / 2.0%" in text  # a: 100 vs 102
    assert "| all-1 | 10.0 | 3.0 (b k1) | 1.0 | 0.5 | 2.5 |" in bounds     # 40 s / 4 GPUs; longest subject


def test_a_folder_without_results_files_is_one_clear_line(tmp_path, capsys):
    import pytest

    with pytest.raises(SystemExit) as stop:
        script().main([str(tmp_path)])
    assert "no results files" in str(stop.value)


def test_the_results_files_run_time_is_read_before_any_log(tmp_path):
    """A run's file written since the time line was kept in it needs no log."""
    runs = {"one-1": ([result("a", "k1", 100e-6, 0, seconds=6.0)], 10.0, 1),
            "all-1": ([result("a", "k1", 100e-6, 0, seconds=3.0), result("b", "k1", 1e-3, 1, seconds=3.0)], 4.0, 2)}
    for name, (results, wall, gpus) in runs.items():
        (tmp_path / f"timex-sweep-{name}.json").write_text(json.dumps(
            {"results": results, "run_time": {"wall": wall, "gpus": gpus, "waited": {"start-up": 1.0, "build": 0.0}}}))
    one, every = script().load(tmp_path)["timex-sweep"]
    assert one.wall == 10.0 and one.phases["start-up"] == 1.0 and one.phases["other"] == pytest.approx(3.0)
    assert every.wall == 4.0 and every.phases["sampling"] == pytest.approx(1.5)   # 3 GPU-s over 2 GPUs
    assert every.phases["other"] == pytest.approx((8.0 - 1.0 - 6.0) / 2)


def test_the_goal_is_judged_without_the_wait_for_workers_to_start():
    """A one-GPU run straight after another waited seconds for its fresh subject process; against it
    four GPUs looked 3.8x when they were 3.4x."""
    s = script()
    one = s.Run("t", "one", 1, [result("a", "k1", 1e-4, 0)], 40.0, {"start-up": 5.0})
    every = s.Run("t", "all", 1, [result("a", "k1", 1e-4, 0)], 10.5, {"start-up": 0.1})
    rows = [line for line in s.report("t", [one, every], gpus=4).splitlines() if line.startswith("| all-1")]
    assert "| 3.81× | 3.37× | not met |" in rows[0]   # 35 / 10.4


def test_the_goal_share_is_an_option_issue_28_asks_1_9x_of_two_gpus(tmp_path, capsys):
    """Issue 33 holds N GPUs to 0.9 N, issue 28 two GPUs to 1.9x: 1.86x is met for one and not the other."""
    for name, wall, gpus in (("one-1", 11.1, 1), ("all-1", 5.97, 2)):
        (tmp_path / f"t-{name}.json").write_text(json.dumps(
            {"results": [result("a", "k1", 1e-4, 0, seconds=1.0)], "run_time": {"wall": wall, "gpus": gpus}}))
    script().main([str(tmp_path), "--gpus", "2"])
    assert "goal ≥ 1.8×" in capsys.readouterr().out
    script().main([str(tmp_path), "--gpus", "2", "--goal-share", "0.95"])
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| all-1"))
    assert "| 1.86× |" in row and "not met" in row
