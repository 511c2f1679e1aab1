"""The results store (SQLite): schema and migration, a newer store refused, two processes appending
at once, history's change points, and compare's @references."""

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cudabench.cli.app import app, optional_value
from cudabench.errors import ConfigError
from cudabench.results.store.history import select, series
from cudabench.results.store.database import MIGRATIONS, SCHEMA_VERSION, Store, check_readable
from cudabench.results.store.provenance import Provenance
from synthetic import doc, measured

SHAPE = {"B": 32, "C": 768, "T": 768}


def run_doc(median_v4, median_v5=1e-3, seed=0):
    return doc([measured("timex", SHAPE, "timex-v4", median_v4, seed=seed),
                measured("timex", SHAPE, "timex-v5", median_v5, seed=seed + 1)])


def fill(path, medians, commits=None):
    """One run per median of timex-v4, at commits c0, c1, ... (40 hex digits each)."""
    commits = commits or [f"{i:x}" * 40 for i in range(len(medians))]
    with Store(path) as store:
        for i, (m, c) in enumerate(zip(medians, commits)):
            store.append(run_doc(m, seed=10 * i), Provenance(c[:40], dirty=False), f"2026-11-23T08:0{i}:00+00:00")
    return commits


def test_a_new_store_has_the_current_schema_and_keeps_a_run_whole(tmp_path):
    path = tmp_path / "r.db"
    document = run_doc(1e-3)
    with Store(path) as store:
        assert store.version == SCHEMA_VERSION
        run_id = store.append(document, Provenance("ab" * 20, dirty=True), "2026-11-23T08:00:00+00:00")
        (run,) = store.runs()
        assert (run.id, run.commit, run.dirty, run.label()) == (run_id, "ab" * 20, True, "ababababab+dirty")
        assert store.document(run) == json.loads(json.dumps(document))  # as `run --json` writes it
        rows = store.db.execute("SELECT subject, case_key, status, source_hash FROM results ORDER BY subject")
        assert rows.fetchall() == [("timex-v4", "timex[B=32,C=768,T=768]/fwd", "ok", "ab" * 32),
                                   ("timex-v5", "timex[B=32,C=768,T=768]/fwd", "ok", "ab" * 32)]


def test_an_older_store_is_migrated_forward_with_its_runs(tmp_path):
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    for statement in MIGRATIONS[0]:  # a store as version 1 left it
        db.execute(statement)
    db.execute("INSERT INTO runs VALUES (1, '2026-01-01', 'cudabench run', ?, 0, ?)", ("cd" * 20, json.dumps(run_doc(2e-3))))
    db.execute("PRAGMA user_version = 1")
    db.commit()
    db.close()
    with Store(path) as store:
        assert store.version == SCHEMA_VERSION == 2
        assert [r.commit for r in store.runs()] == ["cd" * 20]
        columns = [row[1] for row in store.db.execute("PRAGMA table_info(results)")]
        assert "source_hash" in columns
        store.append(run_doc(1e-3), Provenance("ef" * 20, False), "2026-01-02")
        assert len(store.runs()) == 2


def test_a_store_from_a_newer_cudabench_or_not_a_store_is_refused(tmp_path):
    newer = tmp_path / "newer.db"
    sqlite3.connect(newer).execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    for attempt in (lambda: check_readable(newer), lambda: Store(newer)):
        with pytest.raises(ConfigError, match="newer cudabench"):
            attempt()
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all" * 100)
    with pytest.raises(ConfigError, match="is not a cudabench results store"):
        check_readable(junk)


WRITER = """
import sys
sys.path[:0] = [sys.argv[3]]
from cudabench.results.store.database import Store
from cudabench.results.store.provenance import Provenance
from synthetic import doc, measured
with Store(sys.argv[1]) as store:
    for i in range(int(sys.argv[2])):
        store.append(doc([measured("timex", {"B": 8, "C": 4, "T": 64}, "timex-v4", 1e-3, n=50, seed=i)]),
                     Provenance("ab" * 20, False), "2026-11-23")
"""


def test_two_processes_appending_at_once_lose_nothing_and_corrupt_nothing(tmp_path):
    path = tmp_path / "shared.db"
    Store(path).close()  # created, so both writers meet an existing store
    tests = str(Path(__file__).parent)
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), "25", tests]) for _ in range(2)]
    assert [w.wait(timeout=120) for w in writers] == [0, 0]
    with Store(path) as store:
        assert len(store.runs()) == 50
        assert store.db.execute("SELECT count(*) FROM results").fetchone()[0] == 50
        assert store.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_history_finds_the_change_points_between_neighbouring_runs(tmp_path):
    path = tmp_path / "h.db"
    fill(path, [1.00e-3, 1.002e-3, 1.30e-3, 1.301e-3, 0.90e-3])  # slower at run 3, faster at run 5
    with Store(path) as store:
        found = series(select(store.points(), ["timex-v4"]), 0.05)
    (steps,) = found.values()
    assert [s.verdict for s in steps] == ["", "same", "slower", "same", "faster"]
    assert [s.point.run.id for s in steps if s.changed] == [3, 5]


def test_history_command_prints_the_table_and_draws_the_plot(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "h.db"
    fill(path, [1.00e-3, 1.30e-3, 1.30e-3])
    res = CliRunner().invoke(app, ["history", "-k", "timex-v4", "--store", str(path), "--plot",
                                   str(tmp_path / "h.png")])
    assert res.exit_code == 0, res.output
    assert "CHANGE: slower" in res.output and "1 change point(s)" in res.output
    assert (tmp_path / "h.png").read_bytes()[:4] == b"\x89PNG"
    res = CliRunner().invoke(app, ["history", "-k", "matmul-naive", "--store", str(path)])
    assert res.exit_code == 2 and "No measured result" in res.output


def test_compare_reads_stored_runs_by_reference(tmp_path):
    path = tmp_path / "c.db"
    commits = fill(path, [1.00e-3, 1.30e-3])
    slower = CliRunner().invoke(app, ["compare", "@latest~1", "@latest", "--store", str(path)])
    assert slower.exit_code == 1, slower.output
    assert "regression beyond 5%: timex-v4" in slower.output
    by_commit = CliRunner().invoke(app, ["compare", f"@{commits[1][:8]}", f"@{commits[0][:8]}", "--store", str(path)])
    assert by_commit.exit_code == 0, by_commit.output  # the other way round: faster
    unknown = CliRunner().invoke(app, ["compare", "@deadbeef", "@latest", "--store", str(path)])
    assert unknown.exit_code == 2 and "no run in" in unknown.output and "Traceback" not in unknown.output
    nowhere = CliRunner().invoke(app, ["compare", "@latest", "@latest", "--store", str(tmp_path / "none.db")])
    assert nowhere.exit_code == 2 and "no results store" in nowhere.output


def test_compare_resolves_git_names_through_git(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for i in range(2):
        (repo / "f").write_text(str(i))
        subprocess.run([*git, "add", "f"], check=True)
        subprocess.run([*git, "commit", "-qm", f"c{i}"], check=True)
    heads = subprocess.run([*git, "rev-list", "HEAD"], capture_output=True, text=True, check=True).stdout.split()
    path = tmp_path / "g.db"
    fill(path, [1.0e-3, 1.0e-3], commits=list(reversed(heads)))
    with Store(path) as store:
        assert store.resolve("HEAD~1", cwd=repo).commit == heads[1]
        assert store.resolve("HEAD", cwd=repo).commit == heads[0]


def test_run_appends_to_the_store_with_this_work_trees_commit(tmp_path):
    from cudabench.cli.run_outputs import Outputs

    path = tmp_path / "run.db"
    outputs = Outputs(None, None, None, store=path)
    outputs.check()
    outputs.save(run_doc(1e-3), final=False)
    assert not path.exists()  # only the finished run is appended
    outputs.save(run_doc(1e-3), final=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    with Store(path) as store:
        (run,) = store.runs()
        assert run.commit == head and outputs.stored_as == run.id


def test_store_alone_means_the_default_store():
    assert optional_value(["run", "-k", "add2", "--store"], "--store", ("run",)) == ["run", "-k", "add2", "--store="]
    assert optional_value(["run", "--store", "-k", "add2"], "--store", ("run",))[1] == "--store="
    assert optional_value(["run", "--store", "x.db"], "--store", ("run",)) == ["run", "--store", "x.db"]
    assert optional_value(["compare", "--store", "@a"], "--store", ("run",)) == ["compare", "--store", "@a"]


def test_a_store_that_cannot_take_the_run_keeps_it_in_a_file_and_says_so(tmp_path, monkeypatch):
    """Nothing measured is lost: a store locked past the wait (or full, or Ctrl-C while waiting)."""
    import cudabench.results.store.database as store_module
    from cudabench.cli.run_outputs import Outputs

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(store_module, "WAIT_SECONDS", 0.2)
    path = tmp_path / "busy.db"
    Store(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another run holds the write lock
    outputs = Outputs(None, None, None, store=path)
    outputs.save(run_doc(1e-3), final=True)
    holder.execute("ROLLBACK")
    (kept,) = tmp_path.glob("cudabench-unstored-*.json")
    assert json.loads(kept.read_text())["results"][0]["subject"] == "timex-v4"
    assert outputs.stored_as is None and str(kept.name) in outputs.store_problem
    assert "locked" in outputs.store_problem


def test_a_store_that_cannot_be_created_is_refused_before_the_run(tmp_path):
    from cudabench.cli.run_outputs import Outputs

    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="Cannot write"):
        Outputs(None, None, None, store=tmp_path / "file" / "r.db").check()
    weird = tmp_path / "run#1?.db"  # URI characters in the name stay in the name
    sqlite3.connect(weird).execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(ConfigError, match="newer cudabench"):
        check_readable(weird)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "run#1?.db"]


def test_references_to_commits_are_unambiguous_and_prefer_the_clean_run(tmp_path):
    path = tmp_path / "r.db"
    with Store(path) as store:
        store.append(run_doc(1e-3), Provenance("abcd1111" * 5, False), "1")
        store.append(run_doc(1e-3), Provenance("abcd2222" * 5, False), "2")
        store.append(run_doc(2e-3), Provenance("abcd2222" * 5, True), "3")  # the same commit, changed tree
        with pytest.raises(ConfigError, match="matches runs at 2 commits"):
            store.resolve("abcd")
        assert store.resolve("abcd2222").id == 2 and store.resolve("latest").id == 3
    same = CliRunner().invoke(app, ["compare", "@latest", "@latest~0", "--store", str(path)])
    assert same.exit_code == 2 and "name the same stored run" in same.output


def test_history_keeps_differently_timed_results_apart(tmp_path):
    path = tmp_path / "t.db"
    with Store(path) as store:
        store.append(run_doc(1.0e-3), Provenance("aa" * 20, False), "1")
        store.append(doc([measured("timex", SHAPE, "timex-v4", 0.5e-3, timing="events")]),
                     Provenance("bb" * 20, False), "2")
        found = series(select(store.points(), ["timex-v4"]), 0.05)
    assert sorted(k[1] for k in found) == ["timex[B=32,C=768,T=768]/fwd",
                                           "timex[B=32,C=768,T=768]/fwd (events, hot)"]
    assert all(len(steps) == 1 for steps in found.values())  # no change point across timers


def test_store_rewrite_only_for_the_command_itself():
    assert optional_value(["compare", "a.json", "run", "--store"], "--store", ("run",)) == [
        "compare", "a.json", "run", "--store"]
    assert optional_value(["--quiet", "run", "--store"], "--store", ("run",))[-1] == "--store="


# ---- hostile stores (issue 31) ------------------------------------------------------------------------

def spoil(path, run_id, document):
    """Put `document` (any SQLite value) where run `run_id` keeps its results document."""
    db = sqlite3.connect(path)
    db.execute("UPDATE runs SET document = ? WHERE id = ?", (document, run_id))
    db.commit()
    db.close()


@pytest.mark.parametrize("document, fragment", [
    ("{not json", "is not valid JSON: Expecting property name"),
    ('{"schema": "cudabench.results", "schema_version": 2, "results": 5}', "results: Input should be a valid list"),
    ("[1, 2]", "is not a cudabench results file"),
    ("[" * 5000 + "]" * 5000, "nest 5000 deep"),
    ('{"n": ' + "7" * 10_000 + "}", "a number of 10000 digits"),
    (12, "is not a cudabench results file"),  # TEXT affinity: SQLite keeps it as '12'
    (b"\xff\xfe", "not UTF-8"),
])
def test_a_malformed_stored_run_is_one_paragraph_naming_the_store_and_the_run(tmp_path, document, fragment):
    path = tmp_path / "bad.db"
    fill(path, [1.0e-3, 1.1e-3, 1.2e-3])
    spoil(path, 2, document)
    with Store(path) as store:
        with pytest.raises(ConfigError) as info:
            list(store.points())
    assert f"{path} (run 2)" in info.value.message and fragment in info.value.message
    assert "DELETE FROM runs WHERE id = 2" in info.value.hint
    for args in (["history", "--store", path], ["compare", "@latest~1", "@latest", "--store", path],
                 ["report", "--html", tmp_path / "r.html", "--store", path]):
        res = CliRunner().invoke(app, [str(a) for a in args])
        assert res.exit_code == 2 and "Traceback" not in res.output and res.exception.__class__ is SystemExit
        assert "(run 2)" in res.output, res.output


def test_a_run_removed_meanwhile_is_one_message(tmp_path):
    from cudabench.results.store.database import StoredRun

    path = tmp_path / "r.db"
    fill(path, [1.0e-3])
    with Store(path) as store, pytest.raises(ConfigError, match=r"\(run 9\) is not there"):
        store.document(StoredRun(9, "", "", "", False))


def test_the_good_runs_of_a_store_still_read(tmp_path):
    path = tmp_path / "bad.db"
    fill(path, [1.0e-3, 1.3e-3, 1.3e-3])
    spoil(path, 1, "{not json")
    res = CliRunner().invoke(app, ["compare", "@latest~1", "@latest", "--store", str(path)])
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("make, fragment", [
    (lambda tmp: tmp, "is a folder; a store is one SQLite file"),
    (lambda tmp: Path("/dev/null"), "is a character device, not a file"),
    (lambda tmp: ((tmp / "notes.db").write_text("# my notes\n" * 10), tmp / "notes.db")[1],
     "is not a cudabench results store: it is not a SQLite database"),
    (lambda tmp: ((tmp / "tiny.db").write_bytes(b"SQLite"), tmp / "tiny.db")[1], "not a SQLite database"),
])
def test_a_store_path_that_is_no_store_says_what_it_is(tmp_path, make, fragment):
    path = make(tmp_path)
    for attempt in (lambda: Store(path), lambda: check_readable(path)):
        with pytest.raises(ConfigError) as info:
            attempt()
        assert str(path) in info.value.message and fragment in info.value.message
        assert "Another run may hold it" not in info.value.message + info.value.hint
    res = CliRunner().invoke(app, ["history", "--store", str(path)])
    assert res.exit_code == 2 and fragment in " ".join(res.output.split()), res.output


def test_another_programs_database_is_left_alone(tmp_path):
    path = tmp_path / "theirs.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE accounts (id INTEGER)")
    db.commit()
    db.close()
    for attempt in (lambda: Store(path), lambda: check_readable(path)):
        with pytest.raises(ConfigError, match=r"another program's SQLite database \(tables accounts\)"):
            attempt()
    tables = sqlite3.connect(path).execute("SELECT name FROM sqlite_master").fetchall()
    assert tables == [("accounts",)]  # no runs and results tables added to it


def test_a_store_whose_folder_is_a_file_is_one_message(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="file is a file, not a folder"):
        Store(tmp_path / "file" / "r.db")


HOLDER = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
print("holding", flush=True)
time.sleep(float(sys.argv[2]))
"""


def test_waiting_for_a_locked_store_is_said_within_two_seconds_and_names_the_holder(tmp_path, monkeypatch):
    import cudabench.results.store.database as store_module

    path = tmp_path / "busy.db"
    Store(path).close()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), "30"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        monkeypatch.setattr(store_module, "WAIT_SECONDS", 3.0)
        told = []
        start = time.monotonic()
        with Store(path, on_wait=lambda message: told.append((time.monotonic() - start, message))) as store:
            with pytest.raises(ConfigError) as info:
                store.append(run_doc(1e-3), Provenance("ab" * 20, False), "1")
        waited = time.monotonic() - start
    finally:
        holder.kill()
        holder.wait()
    ((when, message),) = told
    assert when < 2 and "waiting for the results store" in message and str(path) in message
    assert 2.5 < waited < 10 and "is locked" in info.value.message and "Another run may" not in info.value.hint
    if Path("/proc/locks").exists():  # Linux names the process that holds the lock
        assert f"process {holder.pid} (" in message and f"process {holder.pid}" in info.value.message


def test_the_default_wait_notice_is_one_line_on_stderr(tmp_path, monkeypatch, capsys):
    import cudabench.results.store.database as store_module

    monkeypatch.setattr(store_module, "WAIT_SECONDS", 0.3)
    path = tmp_path / "busy.db"
    Store(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with Store(path) as store, pytest.raises(ConfigError, match="is locked"):
            store.append(run_doc(1e-3), Provenance("ab" * 20, False), "1")
    finally:
        holder.execute("ROLLBACK")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("cudabench: waiting for the results store")
    with Store(path) as store:  # the lock gone, the store takes the run without a word
        store.append(run_doc(1e-3), Provenance("ab" * 20, False), "2")
    assert capsys.readouterr().err == ""


def test_a_damaged_store_says_so(tmp_path):
    path = tmp_path / "damaged.db"
    fill(path, [1.0e-3] * 3)
    with open(path, "r+b") as f:  # keep the header, spoil the pages after it
        f.seek(100)
        f.write(b"\x17" * 8000)
    res = CliRunner().invoke(app, ["history", "--store", str(path)])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "is damaged (database disk image is malformed)" in " ".join(res.output.split()), res.output
