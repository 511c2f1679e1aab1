"""Processes of a run are sealed (cudabench.engine.sealed): not dumpable, so a subject's code cannot open
their /proc/<pid>/fd entries and write into their pipes; CUDABENCH_DEBUG=1 leaves them open."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cudabench.engine import sealed as seal_module

CODE = "from cudabench.engine.sealed import seal, sealed; print(sealed(), seal(), sealed())"


def probe(**env):
    done = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True,
                          env={**os.environ, "CUDABENCH_DEBUG": "", **env}, timeout=60)
    return done.stdout.split()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_a_sealed_process_is_no_longer_dumpable():
    assert probe() == ["False", "True", "True"]
    assert probe(CUDABENCH_DEBUG="1") == ["False", "False", "False"]


def as_user() -> tuple[str, object]:
    """A Python and a preexec that run a child as an ordinary user: this one, or `nobody` when the tests
    run as root (root opens any process's /proc entries, sealed or not)."""
    if os.geteuid() != 0:
        return sys.executable, None
    python = shutil.which("python3", path="/usr/bin:/bin")  # one that `nobody` may run, without cudabench
    if python is None:
        pytest.skip("as root, the test needs a system python3 to run as nobody")

    def drop() -> None:
        os.setgid(65534)
        os.setuid(65534)

    return python, drop


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
@pytest.mark.parametrize("sealed", [True, False])
def test_another_process_of_the_user_cannot_open_a_sealed_process_pipe(sealed):
    python, drop = as_user()
    source = Path(seal_module.__file__).read_text()  # the real seal(), in a child that cannot import cudabench
    # a pipe of the child's own, as the judge's pipes to its subject process are the user's
    code = (source + "\nimport sys\n" + ("seal()\n" if sealed else "")
            + "r, w = os.pipe()\nprint(w, flush=True)\nsys.stdin.read()\n")
    child = subprocess.Popen([python, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             preexec_fn=drop, env={"PATH": os.environ.get("PATH", "")})
    try:
        fd = child.stdout.readline().strip()
        opener = subprocess.run([python, "-c", OPENER, f"/proc/{child.pid}/fd/{fd}"], capture_output=True, text=True,
                                preexec_fn=drop, timeout=60)
        assert opener.stdout.strip() == ("denied" if sealed else "opened"), opener.stderr
    finally:
        child.kill()
        child.wait(10)


OPENER = """import sys
try:
    open(sys.argv[1], "w").write("{}\\n")
    print("opened")
except PermissionError:
    print("denied")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_sealed_while_holds_until_the_last_block_ends_and_restores_what_was(monkeypatch):
    """Two runs of the Python API at once (threads) or one inside another: sealed until both end, then as
    before the first; a process sealed before stays sealed."""
    monkeypatch.delenv("CUDABENCH_DEBUG", raising=False)
    seal_module._set_dumpable(1)
    with seal_module.sealed_while():
        with seal_module.sealed_while():
            assert seal_module.sealed()
        assert seal_module.sealed()  # the outer run still holds its pipes
    assert not seal_module.sealed()
    seal_module.seal()
    with seal_module.sealed_while():
        pass
    assert seal_module.sealed()
    seal_module._set_dumpable(1)
