"""Issue 31, item 8: hostile inputs as structures, through the whole command line. Hypothesis builds
suite files and results documents (depth, size, types at the real keys, huge numbers, long and
control-character strings); fixed cases add special files (FIFO, /dev/zero, a folder, symlink loops,
dangling links), outputs that are inputs, and kernel families whose spec.py ends the process.

For every case: no traceback, a non-zero exit with an "error:" paragraph, every input file
byte-identical afterwards, and no hang (cases that could block run as `python -m cudabench` under a
time limit). The scripted trial of the same kinds, several hundred cases, is
scripts/bad_inputs_trial.py."""

from __future__ import annotations

import hashlib
import json
import os
import re
import string
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st
from typer.testing import CliRunner

from cudabench.cli.app import app
from synthetic import doc as document, measured

ROOT = Path(__file__).resolve().parents[1]
FEW = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                      HealthCheck.too_slow])
PARAGRAPH = re.compile(r"^error: \S", re.MULTILINE)
runner = CliRunner()


# ---- how a case is judged --------------------------------------------------------------------------

def hashes(folder: Path) -> dict[str, str]:
    """Every regular file and symlink under `folder`: its content hash or link target (FIFOs and
    other special files are not opened)."""
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            found[str(path)] = "-> " + os.readlink(path)
        elif path.is_file() and not path.is_fifo():
            found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def refused(args, folder: Path) -> str:
    """Run the command in this process; it must fail with one paragraph, no traceback, and leave the
    files in `folder` as they were. Returns its output."""
    before = hashes(folder)
    res = runner.invoke(app, [str(a) for a in args])
    text = res.output
    assert not (res.exception and not isinstance(res.exception, SystemExit)), (args, repr(res.exception))
    assert "Traceback" not in text, text
    assert res.exit_code != 0, text
    assert PARAGRAPH.search(text) or "Error: " in text, text  # ours, or click's for an option
    assert unchanged(before, folder), f"an input changed: {args}"
    return text


def unchanged(before: dict[str, str], folder: Path) -> bool:
    """Every file that was there is there as it was (new files, such as outputs, aside)."""
    after = hashes(folder)
    return all(after.get(path) == what for path, what in before.items())


def cudabench(*args, cwd: Path, env: dict | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    """The console entry (forked supervisor and all) in a subprocess, under a time limit."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CUDABENCH_") and k != "COLUMNS"}
    environ.update(CUDA_VISIBLE_DEVICES="", CUDABENCH_STORE=str(cwd / "default.db"),
                   PYTHONPATH=str(ROOT) + os.pathsep + environ.get("PYTHONPATH", ""), **(env or {}))
    return subprocess.run([sys.executable, "-m", "cudabench", *map(str, args)], cwd=cwd, env=environ, timeout=timeout,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace")


def refused_in_subprocess(*args, cwd: Path, env: dict | None = None, timeout: float = 30) -> str:
    before = hashes(cwd)
    res = cudabench(*args, cwd=cwd, env=env, timeout=timeout)  # TimeoutExpired: a hang
    text = res.stdout + res.stderr
    assert "Traceback" not in text, text
    assert res.returncode != 0 and text.strip(), (res.returncode, text)
    assert PARAGRAPH.search(text) or "Error: " in text, text
    assert unchanged(before, cwd), f"an input changed: {args}"
    return text


@pytest.fixture(autouse=True)
def no_gpu(monkeypatch):
    """A valid request ends at the GPU check ("No CUDA device"), also on a machine with a GPU: no
    worker is started and nothing is measured."""
    import cudabench.cli.run

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(cudabench.cli.run, "gpu_likely", lambda: False)
    monkeypatch.delenv("CUDABENCH_MAX_INPUT_BYTES", raising=False)
    monkeypatch.setenv("CUDABENCH_STORE", "/nonexistent/cudabench-test-store.db")


@pytest.fixture(scope="module")
def valid_doc() -> dict:
    results = [measured("add2", {"n": n}, subject, scale * n * 1e-9, role=role, n=30, seed=i)
               for i, n in enumerate((1024, 4096, 16384))
               for subject, role, scale in (("add2", "variant", 1.0), ("torch-add", "baseline", 1.3))]
    from cudabench.results.exporters.json_document import json_safe

    return json.loads(json.dumps(json_safe(document(results))))


def fresh(tmp_path_factory) -> Path:
    return Path(tmp_path_factory.mktemp("case"))


# ---- structures: TOML suites ------------------------------------------------------------------------

TOP_KEYS = ["name", "description", "kernels_dirs", "gpus", "cluster"]
TIMING_KEYS = ["timing", "cold", "repeat", "min_time", "noise", "max_time", "warmup", "timeout"]
CASE_KEYS = ["kernels", "shape", "directions", "baselines", "dtypes"]
NAMES = ["add2", "timex", "timex-v4", "fwd", "fwdbwd", "float32", "all", "2^20", "10^99999", "100ms", "", "n", "T"]

text_values = st.one_of(st.sampled_from(NAMES), st.text(max_size=30),
                        st.text(string.printable + "\x00\x1b\u202e\u200b\ud7ff", min_size=1, max_size=20),
                        st.integers(1000, 100_000).map(lambda n: "x" * n))
scalars = st.one_of(
    st.integers(-2**63, 2**63 - 1), st.integers(2**63, 10**4000),   # past int64, up to the digit limit
    st.floats(), st.booleans(), text_values)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.one_of(st.sampled_from(CASE_KEYS + TIMING_KEYS + ["from", "to", "times", "step", "n"]),
                              st.text(max_size=8)), inner, max_size=4)), max_leaves=12)


def toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if value != value else ("inf" if value > 0 else "-inf") if abs(value) == float("inf") else repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)  # JSON's escapes are TOML's (a lone surrogate is refused as TOML)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{ " + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + " }"


def table(keys: list[str]):
    return st.dictionaries(st.one_of(st.sampled_from(keys), st.text(min_size=1, max_size=6)), values, max_size=4)


@st.composite
def suites(draw) -> str:
    """A suite file: real keys with values of any type, unknown keys, odd depth and size."""
    top, timing = draw(table(TOP_KEYS)), draw(st.one_of(st.none(), table(TIMING_KEYS)))
    cases = draw(st.lists(table(CASE_KEYS), max_size=3))
    text = "".join(f"{toml_key(k)} = {toml_value(v)}\n" for k, v in top.items())
    if timing is not None:
        text += "[timing]\n" + "".join(f"{toml_key(k)} = {toml_value(v)}\n" for k, v in timing.items())
    for case in cases:
        text += "[[case]]\n" + "".join(f"{toml_key(k)} = {toml_value(v)}\n" for k, v in case.items())
    depth = draw(st.sampled_from([0, 0, 0, 50, 1000, 30_000]))
    if depth:
        text += "[[case]]\nkernels = " + "[" * depth + '"add2"' + "]" * depth + "\n"
    return text


@FEW
@given(text=suites())
def test_suite_structures_are_refused_in_one_paragraph(tmp_path_factory, text):
    folder = fresh(tmp_path_factory)
    suite = folder / "suite.toml"
    suite.write_text(text, encoding="utf-8", errors="surrogatepass")
    refused(["run", "--config", suite, "--json", folder / "out.json"], folder)
    assert not (folder / "out.json").exists()


@FEW
@given(key=st.sampled_from([("top", k) for k in TOP_KEYS] + [("timing", k) for k in TIMING_KEYS]
                           + [("case", k) for k in CASE_KEYS]),
       value=st.one_of(st.lists(st.lists(st.integers(), max_size=2), min_size=1, max_size=2),
                       st.dictionaries(st.text(string.ascii_letters, min_size=1, max_size=3), st.booleans(),
                                       min_size=1, max_size=2),
                       st.floats(allow_nan=True).filter(lambda f: f != f or abs(f) == float("inf") or f < 0),
                       st.integers(max_value=0), st.integers(min_value=10**19, max_value=10**200)))
def test_a_wrong_type_at_each_real_key_is_refused(tmp_path_factory, key, value):
    """Nested lists, tables, NaN and negative numbers, zero, numbers past int64: wrong for every key."""
    where, name = key
    folder = fresh(tmp_path_factory)
    top = f"{name} = {toml_value(value)}\n" if where == "top" else ""
    timing = f"[timing]\n{name} = {toml_value(value)}\n" if where == "timing" else ""
    case = 'kernels = ["add2"]\n' + (f"{name} = {toml_value(value)}\n" if where == "case" and name != "kernels" else "")
    if where == "case" and name == "kernels":
        case = f"kernels = {toml_value(value)}\n"
    suite = folder / "suite.toml"
    suite.write_text(top + timing + "[[case]]\n" + case)
    text = refused(["run", "--config", suite], folder)
    assert "No CUDA device" not in text, f"{where}.{name} = {value!r} was accepted"


@FEW
@given(cut=st.integers(0, 200), junk=st.text(min_size=1, max_size=20).filter(lambda s: s.strip()))
def test_junk_spliced_into_a_suite(tmp_path_factory, cut, junk):
    good = '[timing]\nrepeat = 5\n[[case]]\nkernels = ["add2"]\nshape = { n = { from = 64, to = 1024, times = 2 } }\n'
    folder = fresh(tmp_path_factory)
    suite = folder / "suite.toml"
    suite.write_text(good[:cut] + junk + good[cut:], encoding="utf-8", errors="surrogatepass")
    refused(["run", "--config", suite], folder)  # valid or not, it ends in one paragraph (at worst: no GPU)


# ---- structures: results documents ------------------------------------------------------------------

json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10**30, 10**30), st.floats(), text_values),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.one_of(st.sampled_from(["schema", "schema_version", "results",
                                                                        "environment", "case", "stats"]),
                                                      st.text(max_size=6)), inner, max_size=4)),
    max_leaves=15)


def paths_of(value, prefix=()) -> list[tuple]:
    """Every path into `value` (dict keys and list indices), the leaves' and the containers'."""
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths_of(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value[:2]):
            found += paths_of(item, (*prefix, i))
    return found


def other_type(value, choice: int):
    """A value of another JSON type than `value`'s: wrong for a strictly typed field."""
    if isinstance(value, bool):
        options = ["true", [value], {"b": value}]
    elif isinstance(value, (int, float)):
        options = [str(value), [value], {"n": value}]
    elif isinstance(value, str):
        options = [12345, [value], {"s": value}]
    elif isinstance(value, list):
        options = ["list", {"0": value}, 7]
    elif isinstance(value, dict):
        options = [[value], "table", 3]
    else:  # null: an optional part left out; anything but a table of its kind is wrong
        options = [12345, [None], {"x": None}]
    return options[choice % len(options)]


def set_at(doc: dict, path: tuple, value) -> dict:
    doc = json.loads(json.dumps(doc))
    target = doc
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return doc


COMMANDS = {
    "compare-new": lambda d, bad: ["compare", d / "good.json", bad],
    "compare-old": lambda d, bad: ["compare", bad, d / "good.json", "--json", d / "verdicts.json"],
    "plot": lambda d, bad: ["plot", bad, "-o", d / "out.png"],
    "report": lambda d, bad: ["report", "--html", d / "out.html", "--results", bad, "--store", d / "none.db"],
}


@FEW
@given(data=st.data(), command=st.sampled_from(sorted(COMMANDS)))
def test_a_wrong_type_anywhere_in_a_results_file_is_refused(tmp_path_factory, valid_doc, data, command):
    paths = [p for p in paths_of(valid_doc) if p not in (("schema",),)]
    path = data.draw(st.sampled_from(paths), label="path")
    target = valid_doc
    for step in path:
        target = target[step]
    bad_doc = set_at(valid_doc, path, other_type(target, data.draw(st.integers(0, 2), label="choice")))
    folder = fresh(tmp_path_factory)
    (folder / "good.json").write_text(json.dumps(valid_doc))
    (folder / "bad.json").write_text(json.dumps(bad_doc))
    refused(COMMANDS[command](folder, folder / "bad.json"), folder)
    assert not any((folder / name).exists() for name in ("out.png", "out.html", "verdicts.json"))


@FEW
@given(value=json_values, command=st.sampled_from(sorted(COMMANDS)))
def test_any_json_structure_is_refused_as_a_results_file(tmp_path_factory, valid_doc, value, command):
    folder = fresh(tmp_path_factory)
    (folder / "good.json").write_text(json.dumps(valid_doc))
    (folder / "bad.json").write_text(json.dumps(value))
    refused(COMMANDS[command](folder, folder / "bad.json"), folder)


@FEW
@given(depth=st.integers(1, 200_000), kind=st.sampled_from(["[", '{"a":']), closed=st.booleans(),
       command=st.sampled_from(sorted(COMMANDS)))
def test_deep_json_is_refused(tmp_path_factory, valid_doc, depth, kind, closed, command):
    folder = fresh(tmp_path_factory)
    close = "]" if kind == "[" else "}"
    (folder / "good.json").write_text(json.dumps(valid_doc))
    (folder / "bad.json").write_text(kind * depth + ("1" + close * depth if closed else ""))
    refused(COMMANDS[command](folder, folder / "bad.json"), folder)


@FEW
@given(size=st.integers(0, 5000))
def test_a_results_file_over_the_input_limit_is_refused(tmp_path_factory, monkeypatch, valid_doc, size):
    folder = fresh(tmp_path_factory)
    good = folder / "good.json"
    good.write_text(json.dumps(valid_doc))
    monkeypatch.setenv("CUDABENCH_MAX_INPUT_BYTES", str(min(size, good.stat().st_size - 1) or 1))
    text = refused(["compare", good, good], folder)
    assert "too large" in text


# ---- special files, as each kind of input --------------------------------------------------------------

def special(folder: Path, kind: str) -> Path:
    path = folder / f"input-{kind}"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "symlink-loop":
        path.symlink_to(path)
    elif kind == "dangling":
        path.symlink_to(folder / "gone")
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "mutual-loop":
        (folder / "other").symlink_to(path)
        path.symlink_to(folder / "other")
    return path


INPUTS = {
    "suite": lambda d, p: ["run", "--config", p],
    "results": lambda d, p: ["compare", p, p],
    "plot": lambda d, p: ["plot", p, "-o", d / "out.png"],
    "report": lambda d, p: ["report", "--html", d / "out.html", "--results", p],
    "store": lambda d, p: ["history", "--store", p],
    "store-ref": lambda d, p: ["compare", "@latest", "@latest~1", "--store", p],
    "run-store": lambda d, p: ["run", "-k", "add2", "--store", p],
    "kernels-dir": lambda d, p: ["list", "--kernels-dir", p],
}


@pytest.mark.parametrize("kind", ["folder", "symlink-loop", "mutual-loop", "dangling"])
@pytest.mark.parametrize("what", sorted(INPUTS))
def test_special_paths_in_process(tmp_path, what, kind):
    if what == "kernels-dir" and kind == "dangling":
        pytest.skip("a missing --kernels-dir folder is its own case")
    path = special(tmp_path, kind)
    if what == "kernels-dir" and kind == "folder":
        (path / "fam").mkdir()
        (path / "fam" / "spec.py").write_text("x = 1\n")  # a family without FAMILY
    refused(INPUTS[what](tmp_path, path), tmp_path)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
@pytest.mark.parametrize("what", ["suite", "results", "store", "run-store", "kernels-dir"])
def test_files_that_could_block_are_refused_at_once(tmp_path, what, kind):
    path = special(tmp_path, kind)
    refused_in_subprocess(*INPUTS[what](tmp_path, path), cwd=tmp_path, timeout=30)


def test_a_spec_py_that_is_a_fifo_does_not_block(tmp_path):
    """Not a regular file: the folder is no kernel family (skipped, or refused), and nothing waits on it."""
    (tmp_path / "k" / "fam").mkdir(parents=True)
    os.mkfifo(tmp_path / "k" / "fam" / "spec.py")
    res = cudabench("list", "--kernels-dir", tmp_path / "k", cwd=tmp_path, timeout=30)
    assert "Traceback" not in res.stdout + res.stderr
    assert res.returncode == 0 or PARAGRAPH.search(res.stderr), res.stderr


# ---- outputs that are inputs ----------------------------------------------------------------------------

@pytest.mark.parametrize("how", ["same", "symlink", "hardlink", "symlink-to-symlink"])
@pytest.mark.parametrize("case", ["compare-json", "compare-markdown", "plot", "report-results", "report-store",
                                  "run-json", "run-csv", "run-store", "history-plot"])
def test_an_output_that_is_an_input_is_refused(tmp_path, valid_doc, how, case):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(valid_doc))
    suite = tmp_path / "suite.toml"
    suite.write_text('[[case]]\nkernels = ["add2"]\n')
    store = tmp_path / "store.db"
    from cudabench.results.store.database import Store
    from cudabench.results.store.provenance import Provenance

    with Store(store) as opened:
        opened.append(valid_doc, Provenance("ab" * 20, False), "2024-06-01T12:00:00+00:00")
        opened.append(valid_doc, Provenance("cd" * 20, False), "2024-06-02T12:00:00+00:00")
    source = {"compare-json": good, "compare-markdown": good, "plot": good, "report-results": good,
              "report-store": store, "run-json": suite, "run-csv": suite, "run-store": suite,
              "history-plot": store}[case]
    out = source
    if how == "symlink":
        out = tmp_path / "link.png"
        out.symlink_to(source)
    elif how == "hardlink":
        out = tmp_path / "hard.png"
        os.link(source, out)
    elif how == "symlink-to-symlink":
        (tmp_path / "link1").symlink_to(source)
        out = tmp_path / "link2.png"
        out.symlink_to(tmp_path / "link1")
    args = {"compare-json": ["compare", good, good, "--json", out],
            "compare-markdown": ["compare", good, good, "--markdown", out],
            "plot": ["plot", good, "-o", out],
            "report-results": ["report", "--html", out, "--results", good, "--store", store],
            "report-store": ["report", "--html", out, "--store", store],
            "run-json": ["run", "--config", suite, "--json", out],
            "run-csv": ["run", "--config", suite, "--csv", out],
            "run-store": ["run", "--config", suite, "--store", out],
            "history-plot": ["history", "--store", store, "--plot", out]}[case]
    text = refused(args, tmp_path)
    assert "No CUDA device" not in text


@pytest.mark.parametrize("target", ["/proc/self/out.json", "/sys/out.json", "{d}", "{d}/file/out.json", "{d}/fifo",
                                    "/dev/zero"])
@pytest.mark.parametrize("option", ["--json", "--markdown"])
def test_compare_outputs_that_can_never_be_written(tmp_path, valid_doc, target, option):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(valid_doc))
    (tmp_path / "file").write_text("x")
    os.mkfifo(tmp_path / "fifo")
    refused(["compare", good, good, option, target.replace("{d}", str(tmp_path))], tmp_path)


# ---- kernel families whose spec.py ends the process ----------------------------------------------------

EXITS = {
    "sys.exit(0)": "import sys\nsys.exit(0)\n",
    "raise SystemExit": "raise SystemExit\n",
    "os._exit(0)": "import os\nos._exit(0)\n",
    "ctypes exit(0)": "import ctypes\nctypes.CDLL(None).exit(0)\n",
}


@pytest.mark.parametrize("how, command", [(how, ["list"]) for how in sorted(EXITS)]
                         + [(how, ["run", "-k", "leaver", "--json", "r.json"]) for how in ("os._exit(0)", "ctypes exit(0)")])
def test_a_spec_that_exits_is_an_error_naming_it(tmp_path, how, command):
    spec = tmp_path / "k" / "leaver" / "spec.py"
    spec.parent.mkdir(parents=True)
    spec.write_text(EXITS[how])
    text = refused_in_subprocess(*command, "--kernels-dir", tmp_path / "k", cwd=tmp_path)
    assert str(spec) in text
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("body", ["x = (\n", "raise RuntimeError('my bug')\n", "x = 1\n", "FAMILY = 3\n",
                                  "FAMILY = 'add2'\n", "import no_such_module_for_cudabench\n",
                                  "class Boom(BaseException):\n    pass\nraise Boom('x')\n",
                                  "def f():\n    return f()\nf()\n"])
def test_a_broken_spec_in_process(tmp_path, body):
    spec = tmp_path / "k" / "fam" / "spec.py"
    spec.parent.mkdir(parents=True)
    spec.write_text(body)
    text = refused(["list", "--kernels-dir", tmp_path / "k"], tmp_path)
    assert str(spec) in text


def test_a_spec_that_ends_the_process_after_an_error_does_not_pass(tmp_path):
    """The error is said, then an atexit handler of the spec ends the process with 0: still a failure."""
    spec = tmp_path / "k" / "fam" / "spec.py"
    spec.parent.mkdir(parents=True)
    spec.write_text("import atexit, os\natexit.register(lambda: os._exit(0))\nFAMILY = 3\n")
    refused_in_subprocess("list", "--kernels-dir", tmp_path / "k", cwd=tmp_path)


# ---- text that cannot be written ---------------------------------------------------------------------

@pytest.mark.parametrize("field, command", [("subject", c) for c in sorted(COMMANDS)]
                         + [("gpu", "compare-new"), ("command", "report")])
def test_lone_surrogates_in_a_results_file(tmp_path, valid_doc, field, command):
    """"\\ud800" is valid JSON but no text UTF-8 can hold: refused when read, or shown escaped; never a
    crash. In a subprocess: a console that failed to write keeps the text in its buffer for the next."""
    path = {"subject": ("results", 0, "subject"), "command": ("command",), "gpu": ("environment", "gpu")}[field]
    (tmp_path / "good.json").write_text(json.dumps(valid_doc))
    (tmp_path / "bad.json").write_text(json.dumps(set_at(valid_doc, path, "x\ud800")))
    res = cudabench(*COMMANDS[command](tmp_path, tmp_path / "bad.json"), cwd=tmp_path)
    text = res.stdout + res.stderr
    assert "Traceback" not in text, text
    assert res.returncode == 0 or PARAGRAPH.search(text) or "FAIL" in text, text


# ---- option values and the environment ------------------------------------------------------------------

@FEW
@given(option=st.sampled_from(["--shape", "--dtype", "--timing", "--warmup", "--repeat", "--min-time", "--noise",
                               "--max-time", "--timeout", "--direction", "--inputs", "--seed", "--fuzz", "--arch",
                               "--record-as", "--gpus"]),
       value=st.one_of(st.text(min_size=1, max_size=30), st.sampled_from(["-1", "nan", "inf", "1e400", "0", "",
                                                                          "9" * 5000, "2^64", "x=1", "n=-3"])))
def test_option_values_never_break_the_command_line(tmp_path_factory, option, value):
    folder = fresh(tmp_path_factory)
    refused(["run", "-k", "add2", option, value], folder)  # valid or not, it ends in one paragraph


@FEW
@given(threshold=st.one_of(st.text(max_size=12), st.sampled_from(["nan", "inf", "-5%", "1e400%", "%", "5%%"])))
def test_thresholds_never_break_compare(tmp_path_factory, valid_doc, threshold):
    folder = fresh(tmp_path_factory)
    good = folder / "good.json"
    good.write_text(json.dumps(valid_doc))
    bad = folder / "bad.json"
    bad.write_text("{}")
    refused(["compare", good, bad, "--threshold", threshold], folder)


def test_a_narrow_terminal_and_a_broken_nvcc(tmp_path):
    res = cudabench("doctor", cwd=tmp_path, env={"COLUMNS": "5", "CUDABENCH_NVCC": "/bin/false"})
    text = res.stdout + res.stderr
    assert "Traceback" not in text and "nvcc" in text
    assert not re.search(r"nvcc\s*│\s*ok\b", text), text
    refused_in_subprocess("compare", "missing.json", "missing.json", cwd=tmp_path, env={"COLUMNS": "5"})


@pytest.mark.parametrize("value", ["10", "abc", "-1", "0"])
def test_the_input_limit_variable(tmp_path, monkeypatch, valid_doc, value):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(valid_doc))
    monkeypatch.setenv("CUDABENCH_MAX_INPUT_BYTES", value)
    text = refused(["compare", good, good], tmp_path)
    assert "CUDABENCH_MAX_INPUT_BYTES" in text


# ---- stores -----------------------------------------------------------------------------------------------

STORES = {
    "garbage": lambda p: p.write_bytes(bytes(range(256)) * 8),
    "text": lambda p: p.write_text("runs\n"),
    "header-then-garbage": lambda p: p.write_bytes(b"SQLite format 3\x00" + bytes(4096)),
    "foreign": lambda p: _sqlite(p, ["CREATE TABLE users (id INTEGER)"]),
    "newer": lambda p: _sqlite(p, ["PRAGMA user_version = 99"]),
    "dev-null": lambda p: p.symlink_to("/dev/null"),
}


def _sqlite(path: Path, statements: list[str]) -> None:
    import sqlite3

    db = sqlite3.connect(path, isolation_level=None)
    for sql in statements:
        db.execute(sql)
    db.close()


@pytest.mark.parametrize("kind", sorted(STORES))
@pytest.mark.parametrize("what", ["store", "store-ref", "run-store"])
def test_a_store_that_is_not_one(tmp_path, kind, what):
    store = tmp_path / "store.db"
    STORES[kind](store)
    text = refused(INPUTS[what](tmp_path, store), tmp_path)
    assert "No CUDA device" not in text


@pytest.mark.parametrize("document", ["{", "[]", "null", '{"schema": "cudabench.results", "schema_version": 2}'])
def test_a_stored_run_that_is_not_a_results_document(tmp_path, valid_doc, document):
    import sqlite3

    from cudabench.results.store.database import Store
    from cudabench.results.store.provenance import Provenance

    store = tmp_path / "store.db"
    with Store(store) as opened:
        opened.append(valid_doc, Provenance("ab" * 20, False), "2024-06-01T12:00:00+00:00")
        opened.append(valid_doc, Provenance("cd" * 20, False), "2024-06-02T12:00:00+00:00")
    db = sqlite3.connect(store, isolation_level=None)
    db.execute("UPDATE runs SET document = ? WHERE id = 2", (document,))
    db.close()
    for args in (["history", "--store", store], ["compare", "@latest~1", "@latest", "--store", store]):
        text = refused(args, tmp_path)
        assert "run 2" in text
