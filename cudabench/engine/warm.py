"""A warm worker: the judge process of one GPU (cudabench.engine.worker's Handler) kept running
between invocations, with its subject process beside it, so that a later `cudabench run` finds
torch imported, a CUDA context made and extensions loaded.

It listens on a Unix socket in a folder only its user can enter (cudabench.engine.warm_client
makes the path and starts it), serves one connection at a time (a second invocation waits its turn:
two runs never share a GPU), and exits after `--idle` seconds without one. A connection starts with
one of:

    attach   {"key": ...}  a run: the key says which cudabench, Python, torch, kernels folders and
             environment the caller has; another key than this worker's own ends this worker (the
             caller starts one of its own). Then the worker protocol, as over a pipe, until "exit"
    info     what this worker is: pid, GPU, age, idle time, the families its subject process loaded
    stop     exit now

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
import struct
import sys
import time
from typing import Any, Callable, Optional, TextIO

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


class WarmWorker:
    def __init__(self, listener: socket.socket, key: str, handler: Any, idle: float,
                 on_exit: Callable[[], None] = lambda: None) -> None:
        self.listener, self.key, self.handler, self.idle = listener, key, handler, idle
        self.on_exit = on_exit
        self.started = time.time()
        self.last_used = time.time()
        self.runs = 0

    def serve(self) -> str:
        """Connections one at a time until idle, stopped or replaced; why it ended."""
        while True:
            try:
                self.listener.settimeout(self.idle)
                conn, _ = self.listener.accept()
            except socket.timeout:
                return "idle"
            except OSError:
                return "closed"  # its listener was closed under it
            conn.settimeout(None)
            with conn, conn.makefile("r", encoding="utf-8") as reader, \
                    conn.makefile("w", encoding="utf-8") as writer:
                channel = SocketChannel(writer)
                try:
                    if peer_uid(conn) != os.getuid():
                        channel.send({"type": "error", "message": "refused: this worker serves its own user only"})
                        continue
                    outcome = self.connection(reader, channel)
                except (OSError, ValueError):
                    outcome = "gone"  # the caller went away (Ctrl-C): serve the next one
                finally:
                    self.last_used = time.time()
                    self.handler.on_status = lambda text: None
                if outcome in ("stop", "replaced", "unhealthy"):
                    return outcome
                self.after_run()

    def connection(self, reader: TextIO, channel: SocketChannel) -> str:
        line = reader.readline()
        if not line:
            return "gone"
        first = json.loads(line)
        op = first.get("op")
        if op == "info":
            channel.send({"type": "info", **self.info()})
            return "info"
        if op == "stop":
            channel.send({"type": "stopped", "pid": os.getpid()})
            return "stop"
        if op != "attach":
            channel.send({"type": "error", "message": f"expected attach, info or stop, got {op!r}"})
            return "gone"
        if first.get("key") != self.key:
            channel.send({"type": "mismatch", "pid": os.getpid()})
            return "replaced"
        channel.send({"type": "attached", "pid": os.getpid(), "runs": self.runs})
        self.runs += 1
        self.handler.on_status = lambda text: channel.send({"type": "status", "text": text})
        return self.requests(reader, channel)

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
                "runs": self.runs, "loaded": loaded, "key": self.key}


def load_handler(spec: Optional[str]) -> Any:
    """The production judge Handler, or (tests) `FILE:NAME`, a factory in a Python file."""
    if not spec:
        from cudabench.engine.worker import Handler

        return Handler()
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
        from cudabench.engine.worker import preload

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
