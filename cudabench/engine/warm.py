"""A warm worker: the judge process of one GPU (cudabench.engine.worker's Handler) kept running
between invocations, with its subject process beside it, so that a later `cudabench run` finds
torch imported, a CUDA context made and extensions loaded.

It listens on a Unix socket in a folder only its user can enter (cudabench.engine.warm_client
makes the path and starts it), serves one connection at a time (a second invocation waits its turn:
two runs never share a GPU, and a run that has to wait is told why), and exits after `--idle` seconds without one. A connection starts with
one of:

    attach   {"key": ...}  a run: the key says which cudabench, Python, torch, kernels folders and
             environment the caller has; another key than this worker's own ends this worker (the
             caller starts one of its own). Then the worker protocol, as over a pipe, until "exit"
    info     what this worker is: pid, GPU, age, idle time, runs, the families loaded (answered at
             once, also while a run is being served)
    stop     exit (after the run being served, if any)

Isolation across runs is that of fresh workers: the judge never runs a subject's code, and the
subject process is replaced after every run (the new one started at once, so that the next run finds
it ready): no run's subjects share a process with an earlier run's.

    python -m cudabench.engine.warm --socket PATH --key KEY [--idle SECONDS] [--handler FILE:NAME]"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import socket
import queue
import struct
import sys
import threading
import time
from typing import Any, Optional, TextIO

from cudabench.engine import sealed
from cudabench.engine.protocol import encode

IDLE_SECONDS = 600.0


def peer_uid(conn: socket.socket) -> int:
    """The user id of the process at the other end (Linux SO_PEERCRED: pid, uid, gid)."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


class SocketChannel:
    """Messages to the connected caller, framed as over a worker's stdout."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def send(self, message: dict[str, Any]) -> None:
        self.stream.write(encode(message))
        self.stream.flush()


class Caller:
    """One accepted connection and its first message."""

    def __init__(self, conn: socket.socket, first: dict[str, Any]) -> None:
        self.conn, self.first = conn, first
        self.reader = conn.makefile("r", encoding="utf-8")
        self.channel = SocketChannel(conn.makefile("w", encoding="utf-8"))

    def close(self) -> None:
        for closable in (self.reader, self.channel.stream, self.conn):
            try:
                closable.close()
            except OSError:
                pass


class WarmWorker:
    """Runs one at a time (the main thread), while an acceptor thread answers `info` and `stop` at
    once and tells a run that has to wait why it waits."""

    def __init__(self, listener: socket.socket, key: str, handler: Any, idle: float) -> None:
        self.listener, self.key, self.handler, self.idle = listener, key, handler, idle
        self.started = time.time()
        self.last_used = time.time()
        self.runs = 0
        self.busy = False
        self.stopping = threading.Event()
        self.waiting: queue.Queue[Caller] = queue.Queue()

    def serve(self) -> str:
        """Runs one at a time until idle, stopped or replaced; why it ended."""
        acceptor = threading.Thread(target=self.accept, daemon=True)
        acceptor.start()
        while True:
            if self.stopping.is_set():
                return "stop"
            remaining = self.idle - (time.time() - self.last_used)
            if remaining <= 0:
                return "idle"
            try:
                caller = self.waiting.get(timeout=min(remaining, 0.2))
            except queue.Empty:
                if not acceptor.is_alive():
                    return "closed"  # its listener was closed under it
                continue
            self.busy = True
            try:
                outcome = self.run(caller)
            except (OSError, ValueError):
                outcome = "gone"  # the caller went away (Ctrl-C): serve the next one
            finally:
                caller.close()
                self.busy = False
                self.last_used = time.time()
                self.handler.on_status = lambda text: None
            if outcome in ("replaced", "unhealthy", "stop"):
                return outcome
            self.after_run()

    def accept(self) -> None:
        while not self.stopping.is_set():
            try:
                self.listener.settimeout(0.5)
                conn, _ = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            try:
                self.greet(conn)
            except (OSError, ValueError):
                conn.close()

    def greet(self, conn: socket.socket) -> None:
        conn.settimeout(10.0)  # for its first message; a run then waits as long as it needs
        if peer_uid(conn) != os.getuid():
            conn.sendall(encode({"type": "error", "message": "refused: this worker serves its own user only"}).encode())
            conn.close()
            return
        caller = Caller(conn, {})
        line = caller.reader.readline()
        caller.first = json.loads(line) if line.strip() else {}
        op = caller.first.get("op")
        if op == "info":
            caller.channel.send({"type": "info", **self.info()})
        elif op == "stop":
            caller.channel.send({"type": "stopped", "pid": os.getpid(), "after_run": self.busy})
            self.stopping.set()
        elif op == "attach":
            conn.settimeout(None)
            if self.busy or not self.waiting.empty():
                caller.channel.send({"type": "status", "text": "waiting: this GPU's warm worker is serving "
                                                              "another run"})
            self.waiting.put(caller)
            return
        else:
            caller.channel.send({"type": "error", "message": f"expected attach, info or stop, got {op!r}"})
        caller.close()

    def run(self, caller: Caller) -> str:
        channel = caller.channel
        if caller.first.get("key") != self.key:
            channel.send({"type": "mismatch", "pid": os.getpid()})
            return "replaced"
        channel.send({"type": "attached", "pid": os.getpid(), "runs": self.runs})
        self.runs += 1
        self.handler.on_status = lambda text: channel.send({"type": "status", "text": text})
        return self.requests(caller.reader, channel)

    def requests(self, reader: TextIO, channel: SocketChannel) -> str:
        for line in reader:
            if not line.strip():
                continue
            request = json.loads(line)
            if request.get("op") == "exit":
                return "done"
            reply = self.handler.handle(request)
            channel.send(reply)
            if request.get("op") == "hello" and reply.get("type") != "ready":
                return "stop"  # it cannot serve here (no GPU, a broken install): no use staying
            if reply.get("healthy") is False:
                return "unhealthy"
        return "gone"

    def after_run(self) -> None:
        """No subject process serves two runs: a fresh one is started for the next (see
        Handler.renew_subject_process)."""
        renew = getattr(self.handler, "renew_subject_process", None)
        if renew is not None:
            renew()

    def info(self) -> dict[str, Any]:
        loaded = getattr(self.handler, "loaded_families", lambda: [])()
        where = getattr(self.handler, "where", {})
        return {"pid": os.getpid(), "gpu": where.get("gpu", ""), "gpu_uuid": where.get("gpu_uuid", ""),
                "started": self.started, "idle": time.time() - self.last_used, "idle_limit": self.idle,
                "runs": self.runs, "busy": self.busy, "loaded": loaded, "key": self.key}


def load_handler(spec: Optional[str]) -> Any:
    """The production judge Handler, or (tests) `FILE:NAME`, a factory in a Python file."""
    if not spec:
        from cudabench.engine.worker import Handler

        return Handler(spare=True)
    path, _, name = spec.rpartition(":")
    module_spec = importlib.util.spec_from_file_location("cudabench_warm_handler", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return getattr(module, name)()


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m cudabench.engine.warm")
    parser.add_argument("--socket", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--idle", type=float, default=IDLE_SECONDS)
    parser.add_argument("--handler", default="")
    args = parser.parse_args(argv)
    sealed.seal()  # the subject process it starts cannot write into this one's pipes (docs/trust.md)
    os.dup2(2, 1)  # a kernel's printf or a library's chatter goes to the log, never to a caller
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_mask = os.umask(0o177)  # the socket file is made 0600
    try:
        listener.bind(args.socket)
    except OSError as exc:
        print(f"cannot listen on {args.socket}: {exc}", file=sys.stderr)
        os._exit(1)
    finally:
        os.umask(old_mask)
    bound = os.stat(args.socket).st_ino
    listener.listen(8)
    handler = None
    why = "failed"
    try:
        from cudabench.engine.preload import preload

        handler = load_handler(args.handler)
        if not args.handler:
            preload()
        why = WarmWorker(listener, args.key, handler, args.idle).serve()
    except KeyboardInterrupt:
        why = "interrupted"
    finally:
        try:
            if os.stat(args.socket).st_ino == bound:  # not a successor's socket under the same name
                os.unlink(args.socket)
        except OSError:
            pass
        listener.close()
        link = getattr(handler, "link", None)
        if link is not None:
            link.close()
        print(f"warm worker {os.getpid()} exits: {why}", file=sys.stderr)
        sys.stderr.flush()
        os._exit(0)  # skip interpreter teardown: with a broken CUDA context it can hang or crash


if __name__ == "__main__":
    main()
