"""The results store end to end on a GPU: two real runs appended, then history and compare read them."""

import subprocess

import pytest
from typer.testing import CliRunner

from cudabench.cli.app import app
from cudabench.results.store.database import Store

pytestmark = pytest.mark.gpu


def test_runs_go_to_the_store_and_history_and_compare_read_them(tmp_path):
    path = tmp_path / "results.db"
    for _ in range(2):
        res = CliRunner().invoke(app, ["run", "-k", "add2-tile", "--shape", "n=2^20", "--no-baseline",
                                       "--timing", "events", "--store", str(path)])
        assert res.exit_code == 0, res.output
        assert f"store: {path}" in res.output
    with Store(path) as store:
        runs = store.runs()
        head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        assert len(runs) == 2 and all(r.commit == head for r in runs)  # "" where the copy has no .git
        assert [p.result["status"] for p in store.points()] == ["ok", "ok"]
    history = CliRunner().invoke(app, ["history", "-k", "add2-tile", "--store", str(path)])
    assert history.exit_code == 0, history.output
    assert "add2-tile  add2[n=1048576]/fwd" in history.output
    compared = CliRunner().invoke(app, ["compare", "@latest~1", "@latest", "--store", str(path), "-t", "50%"])
    assert compared.exit_code == 0, compared.output
