"""Processes of a run are sealed (cudabench.engine.sealed): not dumpable, so a subject's code cannot open
their /proc/<pid>/fd entries and write into their pipes; CUDABENCH_DEBUG=1 leaves them open."""

import os
import subprocess
import sys

import pytest

CODE = "from cudabench.engine.sealed import seal, sealed; print(sealed(), seal(), sealed())"


def probe(**env):
    done = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True,
                          env={**os.environ, "CUDABENCH_DEBUG": "", **env}, timeout=60)
    return done.stdout.split()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_a_sealed_process_is_no_longer_dumpable():
    assert probe() == ["False", "True", "True"]
    assert probe(CUDABENCH_DEBUG="1") == ["False", "False", "False"]


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() == 0,
                    reason="root opens any process's /proc entries")
def test_another_process_of_the_user_cannot_open_a_sealed_process_pipe():
    sealed = subprocess.Popen([sys.executable, "-c", "from cudabench.engine.sealed import seal; import sys; "
                               "seal(); print('ok', flush=True); sys.stdin.read()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert sealed.stdout.readline().strip() == "ok"
        with pytest.raises(PermissionError):
            open(f"/proc/{sealed.pid}/fd/0", "w")
    finally:
        sealed.kill()
        sealed.wait(10)
