"""Issue 11: hostile inputs on a CPU machine. Every one ends in one clear paragraph and a non-zero
exit (0 only where the command succeeded), never a traceback, and text from users, files and tools
is printed verbatim."""

import json

from typer.testing import CliRunner

from cudabench.cli.app import app
from synthetic import doc, measured

runner = CliRunner()


def invoke(*args):
    res = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in res.output and not isinstance(res.exception, (AttributeError, TypeError, KeyError))
    return res


def write(path, data):
    path.write_text(json.dumps(data))
    return path


# ---- markup: brackets in names, shapes and messages are text -----------------------------------------

def test_a_name_with_markup_is_printed_verbatim():
    res = invoke("run", "--kernel", "add2[/x]")
    assert res.exit_code == 2 and "add2[/x]" in res.output


def test_compare_shows_the_shape_of_each_case(tmp_path):
    old = write(tmp_path / "old.json", doc([measured("add2", {"n": 1048576}, "add2", 1e-3, seed=1)]))
    new = write(tmp_path / "new.json", doc([measured("add2", {"n": 1048576}, "add2", 1e-3, seed=2)]))
    res = invoke("compare", old, new)
    assert res.exit_code == 0 and "add2[n=1048576]/fwd" in res.output
