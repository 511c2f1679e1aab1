"""cudabench.files: reading what users give never blocks, never reads without bound and never ends in
a traceback; parsing failures name the file and the place; outputs that would overwrite an input or
can never be written are refused before any work."""

import io
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from cudabench import files
from cudabench.errors import ConfigError
from cudabench.files import LIMIT_VAR, parse_json, parse_toml, read_input, read_text
from cudabench.outputs import check_outputs

DEEP = 5000


def within(seconds, call):
    """call() in a daemon thread; fail (not hang) when it takes longer than `seconds`."""
    outcome = {}

    def target():
        try:
            outcome["value"] = call()
        except BaseException as exc:  # noqa: B902 - handed back to the test
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s"
    return outcome


def refused(seconds, call) -> ConfigError:
    outcome = within(seconds, call)
    assert isinstance(outcome.get("error"), ConfigError), outcome
    return outcome["error"]


# ---- what is read ----------------------------------------------------------------------------------

def test_a_regular_file_and_a_symlink_to_it_are_read(tmp_path):
    (tmp_path / "a.json").write_bytes(b'{"a": 1}')
    os.symlink(tmp_path / "a.json", tmp_path / "link.json")
    assert read_input(tmp_path / "a.json", "results file") == b'{"a": 1}'
    assert read_text(tmp_path / "link.json", "results file") == '{"a": 1}'


def test_a_fifo_with_no_writer_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    error = refused(5, lambda: read_input(fifo, "results file"))
    assert str(fifo) in error.message and "named pipe (FIFO)" in error.message


def test_a_fifo_swapped_in_after_the_check_is_refused_after_opening(tmp_path, monkeypatch):
    """The race: the path was a regular file when looked at, and is a FIFO when opened."""
    fifo = tmp_path / "pipe.toml"
    os.mkfifo(fifo)
    regular = os.stat(__file__)
    monkeypatch.setattr(files.os, "stat", lambda path, *a, **k: regular)
    error = refused(5, lambda: read_input(fifo, "suite file"))
    assert "named pipe (FIFO)" in error.message


def test_dev_zero_is_refused_at_once():
    start = time.monotonic()
    error = refused(5, lambda: read_input("/dev/zero", "suite file"))
    assert "/dev/zero" in error.message and "character device" in error.message
    assert time.monotonic() - start < 1


def test_a_folder_is_refused(tmp_path):
    error = refused(5, lambda: read_input(tmp_path, "results file"))
    assert f"{tmp_path}: it is a folder" in error.message


def test_a_symlink_loop_and_a_dangling_symlink_are_named(tmp_path):
    os.symlink(tmp_path / "b", tmp_path / "a")
    os.symlink(tmp_path / "a", tmp_path / "b")
    assert "symlink loop" in refused(5, lambda: read_input(tmp_path / "a", "suite file")).message
    os.symlink(tmp_path / "gone.toml", tmp_path / "dangling.toml")
    error = refused(5, lambda: read_input(tmp_path / "dangling.toml", "suite file"))
    assert "gone.toml, which does not exist" in error.message


def test_a_missing_file_gets_the_callers_hint(tmp_path):
    with pytest.raises(ConfigError) as info:
        read_input(tmp_path / "nope.toml", "suite file", missing_hint="Shipped suites are in configs/.")
    assert "does not exist" in info.value.message and info.value.hint == "Shipped suites are in configs/."


def test_a_file_over_the_limit_is_refused_with_its_size_and_the_limit(tmp_path, monkeypatch):
    path = tmp_path / "big.json"
    path.write_bytes(b" " * 5000)
    monkeypatch.setenv(LIMIT_VAR, "4096")
    error = refused(5, lambda: read_input(path, "results file"))
    assert "4.9 KiB (5000 bytes)" in error.message and "4.0 KiB (4096 bytes)" in error.message
    assert LIMIT_VAR in error.hint
    monkeypatch.setenv(LIMIT_VAR, "5000")
    assert len(read_input(path, "results file")) == 5000


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs Linux /proc")
def test_a_file_whose_size_says_nothing_is_still_read_only_up_to_the_limit(monkeypatch):
    assert os.stat("/proc/self/maps").st_size == 0  # a regular file that tells no size
    monkeypatch.setenv(LIMIT_VAR, "64")
    error = refused(5, lambda: read_input("/proc/self/maps", "suite file"))
    assert "too large" in error.message and "goes on past that" in error.message


@pytest.mark.parametrize("value", ["lots", "-5", "0", "1e9"])
def test_a_bad_limit_in_the_environment_is_named(tmp_path, monkeypatch, value):
    monkeypatch.setenv(LIMIT_VAR, value)
    (tmp_path / "a.json").write_text("{}")
    with pytest.raises(ConfigError, match=LIMIT_VAR):
        read_input(tmp_path / "a.json", "results file")


def test_dash_reads_standard_input_only_where_allowed(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b'{"a": 1}')))
    assert read_input("-", "results file", allow_stdin=True) == b'{"a": 1}'
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="does not exist"):
        read_input("-", "results file")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"x" * 100)))
    monkeypatch.setenv(LIMIT_VAR, "10")
    error = refused(5, lambda: read_input("-", "results file", True))
    assert "results file on standard input is too large" in error.message


def test_text_that_is_not_utf8_names_the_byte(tmp_path):
    path = tmp_path / "latin1.toml"
    path.write_bytes(b'name = "caf\xe9"\n')
    with pytest.raises(ConfigError) as info:
        read_text(path, "suite file")
    assert "not UTF-8" in info.value.message and "byte 11 (line 1, column 12)" in info.value.message


# ---- parsing ---------------------------------------------------------------------------------------

def test_json_and_toml_nested_thousands_deep_are_one_message():
    for parse, text, language in ((parse_json, "[" * DEEP + "]" * DEEP, "JSON"),
                                  (parse_toml, "a = " + "[" * DEEP + "]" * DEEP, "TOML"),
                                  (parse_toml, "a = " + "{ b = " * DEEP + "}" * DEEP, "TOML")):
        with pytest.raises(ConfigError) as info:
            parse(text, "deep.x", "file")
        assert f"deep.x is not valid {language}" in info.value.message
        assert f"nest {DEEP} deep" in info.value.message and "line 1" in info.value.message


def test_integers_past_the_digit_limit_are_named_with_their_place():
    with pytest.raises(ConfigError) as info:
        parse_json('{"a": 1,\n "b": ' + "7" * 10_000 + "}", "r.json", "results file")
    assert "a number of 10000 digits at line 2, column 7" in info.value.message
    with pytest.raises(ConfigError) as info:
        parse_toml("a = 1\nb = " + "7" * 10_000, "s.toml", "suite file")
    assert "a number of 10000 digits at line 2, column 5" in info.value.message


def test_syntax_errors_say_line_and_column():
    with pytest.raises(ConfigError, match=r"r.json is not valid JSON: .* at line 2, column 1"):
        parse_json(b'{"a": 1,\n}', "r.json", "results file")
    with pytest.raises(ConfigError, match=r"s.toml is not valid TOML: .*line 2, column 5"):
        parse_toml(b"a = 1\nb = = 2\n", "s.toml", "suite file")
    with pytest.raises(ConfigError, match="not UTF-8"):
        parse_json(b'"\xff"', "r.json", "results file")


def test_valid_text_parses():
    assert parse_json(b'{"a": [1, 2.5, "x"]}', "r.json", "results file") == {"a": [1, 2.5, "x"]}
    assert parse_toml('a = 1\n[b]\nc = "d"\n', "s.toml", "suite file") == {"a": 1, "b": {"c": "d"}}


# ---- outputs ---------------------------------------------------------------------------------------

def test_an_output_that_is_an_input_through_a_symlink_is_refused(tmp_path):
    source = tmp_path / "old.json"
    source.write_text("{}")
    os.symlink(source, tmp_path / "alias.json")
    with pytest.raises(ConfigError) as info:
        check_outputs([None, tmp_path / "alias.json"], [source])
    assert "would overwrite the input" in info.value.message and "alias.json" in info.value.message
    os.link(source, tmp_path / "hard.json")
    with pytest.raises(ConfigError, match="would overwrite the input"):
        check_outputs([tmp_path / "hard.json"], [source])
    (tmp_path / "sub").mkdir()
    with pytest.raises(ConfigError, match="would overwrite the input"):
        check_outputs([tmp_path / "sub" / ".." / "old.json"], [source])


def test_two_outputs_that_are_one_file_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="are the same file"):
        check_outputs([tmp_path / "v.json", tmp_path / "." / "v.json"])


@pytest.mark.parametrize("make, fragment", [
    (lambda tmp: tmp, "it is a folder"),
    (lambda tmp: (os.mkfifo(tmp / "pipe"), tmp / "pipe")[1], "named pipe (FIFO)"),
    (lambda tmp: Path("/dev/zero"), "character device"),
    (lambda tmp: Path("/proc/self/out.json"), "under /proc"),
    (lambda tmp: Path("/sys/out.json"), "under /sys"),
    (lambda tmp: ((tmp / "file").write_text(""), tmp / "file" / "out.json")[1], "file is a regular file, not a folder"),
])
def test_outputs_that_can_never_be_written_are_refused(tmp_path, make, fragment):
    path = make(tmp_path)
    error = refused(5, lambda: check_outputs([path], []))
    assert str(path) in error.message and fragment in error.message, error.message


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_an_output_in_a_read_only_folder_is_refused(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        with pytest.raises(ConfigError, match="not writable"):
            check_outputs([folder / "out.json"])
    finally:
        folder.chmod(0o700)


def test_standard_streams_dev_null_and_new_folders_are_accepted(tmp_path):
    check_outputs(["-", "/dev/stdout", None, tmp_path / "new" / "deeper" / "out.json"], ["-"])
    assert list(tmp_path.iterdir()) == []  # nothing made, nothing left behind
    with pytest.raises(ConfigError, match="does not exist"):
        check_outputs([tmp_path / "new" / "out.json"], make_folders=False)


# ---- through the readers that use it -----------------------------------------------------------------

def results_file(tmp_path, text, name="r.json"):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("text, fragment", [
    ("[" * DEEP + "]" * DEEP, f"nest {DEEP} deep"),
    ('{"schema": "cudabench.results", "seed": ' + "7" * 10_000 + "}", "a number of 10000 digits at line 1, column 41"),
    ('{"schema": "cudabench.results",\n "schema_version": 2,,}', "at line 2, column 22"),
])
def test_load_results_turns_every_parse_failure_into_one_message(tmp_path, text, fragment):
    from cudabench.results.exporters.json_document import load_results

    path = results_file(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_results(path)
    assert str(path) in info.value.message and fragment in info.value.message, info.value.message


def test_load_results_bounds_every_integer(tmp_path):
    """Below the digit limit, a 400-digit count still reads as a number; the schema stops it there."""
    import json

    from cudabench.results.exporters.json_document import json_safe, load_results
    from synthetic import doc, measured

    document = json_safe(doc([measured("add2", {"n": 1024}, "add2", 1e-3)]))
    document["results"][0]["case"]["shape"]["n"] = 10**400
    path = results_file(tmp_path, json.dumps(document))
    with pytest.raises(ConfigError) as info:
        load_results(path)
    assert "results[0].case.shape.n: Input should be less than" in info.value.message
    assert "the number of 401 digits" in info.value.message and len(info.value.message) < 400


@pytest.mark.parametrize("args", [["plot", "/dev/zero"], ["compare", "OLD", "/dev/zero"], ["compare", "FIFO", "OLD"],
                                  ["report", "--html", "OUT", "--results", "FIFO"], ["run", "--config", "/dev/zero"]])
def test_commands_refuse_devices_and_fifos_at_once(tmp_path, args):
    from typer.testing import CliRunner

    from cudabench.cli.app import app

    from cudabench.results.exporters.json_document import write_json_atomic
    from synthetic import doc, measured

    os.mkfifo(tmp_path / "fifo")
    old = tmp_path / "old.json"
    write_json_atomic(old, doc([measured("add2", {"n": 1024}, "add2", 1e-3)]))
    names = {"OLD": str(old), "FIFO": str(tmp_path / "fifo"), "OUT": str(tmp_path / "r.html")}
    outcome = within(20, lambda: CliRunner().invoke(app, [names.get(a, a) for a in args]))
    res = outcome["value"]
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "not a regular file" in res.output, res.output
