"""The console script runs each command in a forked child and waits for it. A command that ends
without saying it finished (a kernel family's spec.py or one of its imports calling os._exit, a
native exit, a kill) is reported with what it was loading at the time, and never exits 0: a CI job
must not pass on a run that wrote nothing.

The child tells the parent, through a pipe, which spec.py it is loading and that it finished; the
parent only waits (Ctrl-C reaches the child, which keeps what it measured) and reads those lines."""

from __future__ import annotations

import os
import signal
import sys
from typing import Callable, NoReturn, Optional

_pipe: Optional[int] = None  # the child's end, set in the child only


def tell(line: str) -> None:
    """One line for the parent (no-op outside a supervised child)."""
    if _pipe is not None:
        try:
            os.write(_pipe, (line.replace("\n", " ") + "\n").encode("utf-8", "replace"))
        except OSError:
            pass


def supervised(body: Callable[[], None]) -> None:
    """Run `body` (which ends in SystemExit, as a click app does) in a forked child where fork exists."""
    if not hasattr(os, "fork") or os.environ.get("CUDABENCH_NO_SUPERVISOR"):
        body()
        return
    read_end, write_end = os.pipe()  # not inherited by the programs the command starts (PEP 446)
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        _child(write_end, body)
    os.close(write_end)
    _parent(pid, read_end)


def _child(write_end: int, body: Callable[[], None]) -> NoReturn:
    global _pipe
    _pipe = write_end
    from cudabench.spec import registry

    registry.LOAD_HOOKS.append(lambda path, done: tell(f"{'loaded' if done else 'loading'} {path}"))
    try:
        body()
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt:
        code = 130
    tell(f"done {code if isinstance(code, int) else (0 if code is None else 1)}")
    sys.exit(code)


def _parent(pid: int, read_end: int) -> NoReturn:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal's Ctrl-C reaches the child too
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda number, frame: os.kill(pid, number))
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    lines = _read_all(read_end).splitlines()
    code = os.waitstatus_to_exitcode(status)
    done = [line for line in lines if line.startswith("done ")]
    if done:  # what the command decided, even if an exit hook changed the process's own code afterwards
        said = done[-1].split()[1]
        os._exit(int(said) if said.lstrip("-").isdigit() and int(said) != 0 else (code if code > 0 else 0))
    sys.stderr.write(unfinished_message(lines, code) + "\n")
    sys.stderr.flush()
    os._exit(code if code > 0 else (128 - code if code < 0 else 1))


def unfinished_message(lines: list[str], code: int) -> str:
    """What the parent says about a child that ended without finishing."""
    loading = [line[len("loading "):] for line in lines if line.startswith("loading ")]
    loaded = {line[len("loaded "):] for line in lines if line.startswith("loaded ")}
    pending = [path for path in loading if path not in loaded]
    how = (f"was killed by signal {signal.Signals(-code).name}" if code < 0 and -code in signal.valid_signals()
           else f"exited with code {code} from inside the process")
    where = (f" while loading {pending[-1]} (a kernel family's spec.py, or something it imports, ended the process: "
             "it must define FAMILY and return)") if pending else ""
    return (f"error: cudabench {how} before the command finished{where}. Nothing after that point ran: no "
            "results were written beyond those already saved.")


def _read_all(fd: int) -> str:
    os.set_blocking(fd, False)
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace")
