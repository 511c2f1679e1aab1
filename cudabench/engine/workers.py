"""The parent's handle on a worker. `ProcessWorker` runs `python -m cudabench.engine.worker` in a
fresh interpreter (like multiprocessing's spawn: nothing of the parent's CUDA state is inherited)
in its own process group, and is the watchdog: every request has a deadline, past which the whole
group is killed. A worker that dies, hangs or writes garbage raises WorkerLost with what it said
last; the caller records that against the subject it held and starts a fresh worker.
`InlineWorker` answers requests in this process (tests of the run logic, no subprocess)."""

from __future__ import annotations

import collections
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Optional, Protocol, Sequence

from cudabench.engine import protocol
from cudabench.engine.protocol import ProtocolError, decode
from cudabench.errors import CudabenchError

HELLO_TIMEOUT = 300.0    # a worker's start: Python, torch, CUDA, and the ceilings measured once per GPU

Status = Callable[[str], None]
_EOF = object()
DRAIN_TIMEOUT = 5.0  # seconds to wait for a finished worker's pipes to be read to their end


class WorkerLost(Exception):
    """The worker is gone or unusable; `reason` says how, in words for a results table."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Worker(Protocol):
    def request(self, message: dict[str, Any], timeout: float, on_status: Status = ...) -> dict[str, Any]: ...

    def close(self) -> None: ...


def worker_command(python: str = sys.executable, request: Optional[dict[str, Any]] = None,
                   keep_spare: bool = False) -> list[str]:
    """The worker's command line; with `request`, a one-shot worker that answers it and exits
    (used under a profiler, whose stdin is not the worker's); with `keep_spare`, one that will serve
    several runs (a Dask worker's lane) and so keeps a spare subject process from the start."""
    command = [python, "-m", "cudabench.engine.worker"]
    if request is not None:
        command += ["--request", json.dumps(request)]
    return command + (["--keep-spare"] if keep_spare else [])


def describe_exit(code: Optional[int]) -> str:
    if code is None:
        return "stopped answering"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


class ProcessWorker:
    unanswered = 0  # requests sent and not yet answered (the caller may send one ahead: engine/scheduler.py)

    def __init__(self, command: Sequence[str], env: Optional[dict[str, str]] = None,
                 echo: Optional[Callable[[str], None]] = None, keep_log: bool = False) -> None:
        self.echo = echo
        self.tail: collections.deque[str] = collections.deque(maxlen=None if keep_log else 50)  # its log lines
        self.messages: queue.Queue = queue.Queue()
        self.proc = subprocess.Popen(list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1, env=env,
                                     start_new_session=True)  # its own process group: killed as one
        self._readers = [threading.Thread(target=reader, args=(stream,), daemon=True)
                         for stream, reader in ((self.proc.stdout, self._read_messages),
                                                (self.proc.stderr, self._read_log))]
        for thread in self._readers:
            thread.start()

    def _read_messages(self, stream) -> None:
        try:
            for line in stream:
                try:
                    message = decode(line)
                except ProtocolError as exc:
                    self.messages.put(exc)
                    continue
                if message is None:
                    self._log(line)
                else:
                    self.messages.put(message)
        except (OSError, ValueError):
            pass
        self.messages.put(_EOF)

    def _read_log(self, stream) -> None:
        try:
            for line in stream:
                self._log(line)
        except (OSError, ValueError):
            pass

    def _log(self, line: str) -> None:
        line = line.rstrip("\n")
        self.tail.append(line)
        if self.echo is not None:
            self.echo(line)

    def send(self, message: dict[str, Any]) -> None:
        self.unanswered += 1
        try:
            self.proc.stdin.write(json.dumps(message) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass  # it died: the next wait() says how

    def request(self, message: dict[str, Any], timeout: float, on_status: Status = lambda s: None) -> dict[str, Any]:
        self.send(message)
        return self.wait(timeout, on_status)

    def wait(self, timeout: float, on_status: Status = lambda s: None) -> dict[str, Any]:
        """The next reply (status messages go to `on_status`); the watchdog kills the worker's
        process group when `timeout` seconds pass first."""
        end = time.monotonic() + timeout
        while True:
            remaining = end - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise WorkerLost(f"timed out after {timeout:g} s (the kernel may not terminate); the worker "
                                 "was killed")
            try:
                item = self.messages.get(timeout=min(remaining, 1.0))
            except queue.Empty:
                continue
            if item is _EOF:
                code = self._exit_code()
                self.drain()  # its last stderr lines may still be in the pipe, unread
                raise WorkerLost(f"the worker {describe_exit(code)}{self.last_words()}")
            if isinstance(item, ProtocolError):
                self.kill()
                raise WorkerLost(f"the worker broke the protocol: {item}")
            if item.get("type") == "status":
                on_status(str(item.get("text", "")))
                continue
            self.unanswered = max(0, self.unanswered - 1)
            return item

    def _exit_code(self) -> Optional[int]:
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # closed its stdout but lives on
            self.kill()
            return self.proc.returncode

    def drain(self) -> None:
        """Let the reader threads take in what the process wrote before it ended. The end of its
        stdout says nothing of its stderr: on a busy machine the stderr reader may not yet have read
        the lines written last ("about to exit", a Python error), which would then be missing from
        its last words. Bounded: a process that left the group may hold a pipe open."""
        end = time.monotonic() + DRAIN_TIMEOUT
        for thread in self._readers:
            thread.join(max(0.0, end - time.monotonic()))

    def last_words(self, lines: int = 3) -> str:
        """Its last few log lines, e.g. a Python error or a driver message."""
        said = [ln.strip() for ln in self.tail if ln.strip()][-lines:]
        return (": " + " | ".join(said)) if said else ""

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass

    def close(self) -> None:
        """Ask it to exit; kill it if it does not within a few seconds, or at once when a request waits
        behind the one it serves (it would start that subject before it read the exit)."""
        if self.proc.poll() is None and self.unanswered <= 1:
            self.send(protocol.request(protocol.Exit()))
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self.kill()
        self.drain()  # run_one_shot reads the tail next
        readers = dict(zip((self.proc.stdout, self.proc.stderr), self._readers))
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream in readers and readers[stream].is_alive():
                continue  # held open elsewhere: closing it would block until its reader's read returns
            try:
                stream.close()
            except (OSError, ValueError):
                pass


class InlineWorker:
    """Answers requests in this process through a worker Handler: no isolation, no watchdog. For
    tests of the run logic (and nothing else)."""

    def __init__(self, handler: Any) -> None:
        self.handler = handler
        self.handle = type(handler).handle  # taken once, as serve() does in a worker process

    def request(self, message: dict[str, Any], timeout: float, on_status: Status = lambda s: None) -> dict[str, Any]:
        self.handler.on_status = on_status
        return self.handle(self.handler, message)

    def close(self) -> None:
        pass


def run_one_shot(command: Sequence[str], env: Optional[dict[str, str]], echo: Callable[[str], None],
                 timeout: float) -> tuple[int, str, Optional[dict[str, Any]]]:
    """Run a one-shot worker (possibly under a profiler that wraps it) to the end: (exit code, all
    its log text, its reply or None). The watchdog kills it after `timeout` seconds."""
    worker = ProcessWorker(command, env, echo, keep_log=True)
    reply: Optional[dict[str, Any]] = None
    try:
        reply = worker.wait(timeout)
        code = worker.proc.wait(timeout=timeout)  # a profiler writes its report after the worker exits
    except WorkerLost as lost:
        worker.tail.append(lost.reason)
        code = worker.proc.returncode if worker.proc.returncode is not None else -9
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.tail.append(f"timed out after {timeout:g} s")
        code = -9
    finally:
        worker.close()
    return code, "\n".join(worker.tail), reply


def one_request(hello: dict[str, Any], request: dict[str, Any], timeout: float, expected: str, what: str,
                on_ready: Callable[[dict[str, Any]], None] = lambda ready: None,
                command: Optional[Sequence[str]] = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """A fresh worker's ready message and its reply to one request (the lessons ask one question
    each; `on_ready` hears the ready message before the request goes). A worker that cannot start
    (exit 2), is lost, or answers something else than `expected` (exit 1: the measurement failed) is
    one CudabenchError that says `what` could not be measured, and why."""
    worker = ProcessWorker(list(command) if command else worker_command())
    try:
        ready = worker.request(hello, HELLO_TIMEOUT)
        if ready.get("type") != "ready":
            raise CudabenchError(str(ready.get("message")), str(ready.get("hint", "")))
        on_ready(ready)
        reply = worker.request(request, HELLO_TIMEOUT + timeout)
    except WorkerLost as lost:
        raise CudabenchError(f"{what} could not be measured: {lost.reason}") from None
    finally:
        worker.close()
    if reply.get("type") != expected:
        error = CudabenchError(str(reply.get("message", reply)), str(reply.get("hint", "")))
        error.exit_code = int(reply.get("exit_code", 1))
        raise error
    return ready, reply
