"""`cudabench watch` on the CPU: the loop (run, wait for an edit, run again, compare with the run before),
what it watches, and the mistakes that end it with one paragraph and exit 2."""

import hashlib
import json
import os
import time

import pytest
from typer.testing import CliRunner

from cudabench.cli import watch as watch_module
from cudabench.cli.app import app
from cudabench.cli.run_outputs import WRITTEN


def test_an_unknown_kernel_ends_it_with_one_paragraph_and_exit_2():
    res = CliRunner().invoke(app, ["watch", "-k", "no-such-kernel"])
    assert res.exit_code == 2 and "Unknown kernel 'no-such-kernel'" in res.output
    assert "Traceback" not in res.output


def test_it_needs_what_to_run():
    res = CliRunner().invoke(app, ["watch", "--shape", "n=64"])
    assert res.exit_code == 2 and "--kernel" in res.output


def _write_results(path):
    """What run does at its end: the results file, and the sha256 of the bytes it wrote."""
    text = json.dumps({"results": []})
    with open(path, "w") as f:
        f.write(text)
    WRITTEN[str(path)] = hashlib.sha256(text.encode()).hexdigest()


def _changes(monkeypatch, fake_invoke, changes):
    """watch with commands answered by `fake_invoke` and the files changing as `changes` say, then Ctrl-C."""
    waits = iter([*changes, KeyboardInterrupt()])

    def fake_wait(paths, stamp, interval):
        step = next(waits)
        if isinstance(step, BaseException):
            raise step
        return step

    monkeypatch.setattr(watch_module, "invoke", fake_invoke)
    monkeypatch.setattr(watch_module, "wait_for_change", fake_wait)


def test_it_runs_again_after_an_edit_and_compares_with_the_run_before(monkeypatch, tmp_path):
    calls = []

    def fake_invoke(argv):
        calls.append(argv)
        if argv[0] == "run":
            _write_results(argv[argv.index("--json") + 1])
            return 0 if len(calls) < 4 else 1  # a later run that fails (a build error) goes on watching
        return 0

    _changes(monkeypatch, fake_invoke, [[tmp_path / "kernels" / "k.cu"], [tmp_path / "x"]])
    res = CliRunner().invoke(app, ["watch", "-k", "add2", "--shape", "n=64", "--kernels-dir", str(tmp_path)])
    assert res.exit_code == 130 and "Traceback" not in res.output  # Ctrl-C
    runs = [c for c in calls if c[0] == "run"]
    compares = [c for c in calls if c[0] == "compare"]
    assert len(runs) == 3 and all(c[1:6] == ["-k", "add2", "--shape", "n=64", "--kernels-dir"] for c in runs)
    assert [c[1:3] for c in compares] == [[runs[0][-1], runs[1][-1]], [runs[1][-1], runs[2][-1]]]
    assert "changed: " in res.output and "k.cu" in res.output
    # from the second turn on, the baselines of the turn before are kept where nothing changed, from the
    # bytes that turn's run wrote
    assert "--baselines-from" not in runs[0]
    assert [c[c.index("--baselines-from") + 1] for c in runs[1:]] == [runs[0][-1], runs[1][-1]]
    assert [c[c.index("--baselines-digest") + 1] for c in runs[1:]] == [WRITTEN[runs[0][-1]], WRITTEN[runs[1][-1]]]


def _recording_runs():
    """(the run commands watch gave, a fake invoke that records them and writes an empty results file)."""
    runs = []

    def fake_invoke(argv):
        if argv[0] == "run":
            runs.append(argv)
            _write_results(argv[argv.index("--json") + 1])
        return 0

    return runs, fake_invoke


def test_fresh_baselines_measures_them_every_turn(monkeypatch, tmp_path):
    runs, fake_invoke = _recording_runs()

    _changes(monkeypatch, fake_invoke, [[tmp_path / "k.cu"]])
    res = CliRunner().invoke(app, ["watch", "--fresh-baselines", "-k", "add2", "--shape", "n=64"])
    assert res.exit_code == 130 and len(runs) == 2
    assert not any("--baselines-from" in r for r in runs) and not any("--fresh-baselines" in r for r in runs)


def test_it_watches_the_kernels_folders_and_the_suite_and_sees_an_edit(tmp_path):
    family = tmp_path / "mine" / "fam"
    family.mkdir(parents=True)
    (family / "fam.cu").write_text("a")
    (family / "__pycache__").mkdir()
    suite = tmp_path / "suite.toml"
    suite.write_text("x")
    paths = watch_module.watched_paths(["--kernels-dir", str(tmp_path / "mine"), "--config", str(suite)])
    assert paths[1:] == [tmp_path / "mine", suite]
    stamp = watch_module.snapshot(paths)
    assert family / "fam.cu" in stamp and suite in stamp
    (family / "__pycache__" / "x.pyc").write_text("ignored")
    looks = []

    def edit_on_third_look(seconds):
        looks.append(seconds)
        if len(looks) == 3:
            time.sleep(0.01)
            (family / "fam.cu").write_text("ab")
            os.utime(family / "fam.cu")

    changed = watch_module.wait_for_change(paths, stamp, 0.1, sleep=edit_on_third_look)
    assert changed == [family / "fam.cu"] and len(looks) == 3


@pytest.mark.parametrize("command", ["watch", "workers"])
def test_help(command):
    res = CliRunner().invoke(app, [command, "--help"])
    assert res.exit_code == 0 and "Examples" in res.output


def test_with_an_op_it_watches_the_ops_package_without_importing_it(tmp_path, monkeypatch):
    import sys

    package = tmp_path / "mypkg_watched"
    package.mkdir()
    (package / "__init__.py").write_text("raise SystemExit('the watcher ran my code')\n")
    (package / "ops.py").write_text("def f(a): return a\n")
    (tmp_path / "bench_helpers.py").write_text("def make(shape, gen, device): return {}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    paths = watch_module.watched_paths(["--op", "mypkg_watched.ops:f", "--op-inputs=bench_helpers:make",
                                        "--op-reference", "nowhere_at_all:ref"])
    assert paths[1:] == [package, tmp_path / "bench_helpers.py"]
    assert "mypkg_watched" not in sys.modules
    assert package / "ops.py" in watch_module.snapshot(paths)
    assert watch_module._names_option("--op")


@pytest.mark.parametrize("option", [["--cluster", "tcp://head:8786"], ["--baselines-from=old.json"],
                                    ["--op", "mypkg.ops:f"]])
def test_no_baselines_kept_for_a_cluster_an_op_or_a_file_of_the_users(monkeypatch, tmp_path, option):
    runs, fake_invoke = _recording_runs()
    _changes(monkeypatch, fake_invoke, [[tmp_path / "k.cu"]])
    res = CliRunner().invoke(app, ["watch", "-k", "add2", *option])
    assert res.exit_code == 130 and len(runs) == 2
    assert sum(a.startswith("--baselines-from") for a in runs[1]) == (option[0].startswith("--baselines-from"))


def test_a_turn_whose_run_wrote_no_results_keeps_nothing_next(monkeypatch, tmp_path):
    runs = []

    def fake_invoke(argv):  # a run that left a file it did not write at its end (interrupted, or not its own)
        if argv[0] == "run":
            runs.append(argv)
            with open(argv[argv.index("--json") + 1], "w") as f:
                json.dump({"results": []}, f)
        return 0

    _changes(monkeypatch, fake_invoke, [[tmp_path / "k.cu"]])
    res = CliRunner().invoke(app, ["watch", "-k", "add2"])
    assert res.exit_code == 130 and len(runs) == 2 and "--baselines-from" not in runs[1]


def test_its_json_holds_the_latest_turn_and_run_gets_one_json(monkeypatch, tmp_path):
    """--json is watch's own: before, run was given the user's and watch's own, and click kept one."""
    runs, fake_invoke = _recording_runs()
    _changes(monkeypatch, fake_invoke, [[tmp_path / "k.cu"]])
    latest = tmp_path / "latest.json"
    res = CliRunner().invoke(app, ["watch", "-k", "add2", "--json", str(latest)])
    assert res.exit_code == 130 and len(runs) == 2, res.output
    assert all(r.count("--json") == 1 and str(latest) not in r for r in runs)
    assert latest.read_text() == json.dumps({"results": []})
    res = CliRunner().invoke(app, ["watch", "-k", "add2", "--json", "-"])
    assert res.exit_code == 2 and "takes a file" in res.output


def test_a_baselines_digest_of_the_user_is_not_given_twice(monkeypatch, tmp_path):
    runs, fake_invoke = _recording_runs()
    _changes(monkeypatch, fake_invoke, [[tmp_path / "k.cu"]])
    res = CliRunner().invoke(app, ["watch", "-k", "add2", "--baselines-digest", "0" * 64])
    assert res.exit_code == 130 and all(r.count("--baselines-digest") == 1 for r in runs), res.output


def test_a_usage_error_inside_a_turn_is_an_exit_code_not_an_exception(capsys):
    """typer carries its own copy of click: its UsageError is not click's, and once ended watch mid-session."""
    assert watch_module.invoke(["run", "-k", "add2", "--timing", "events", "--timing", "graph"]) == 2
    assert "takes one value" in capsys.readouterr().err
