"""A worker process's two ends: the message pipe it answers on (Channel) and the loop that reads
requests and answers them one at a time (serve). The judge process (engine/worker.py) and the subject
process (engine/subject_worker.py) both run them."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, TextIO

from cudabench.engine.protocol import encode


class Channel:
    """Messages on the original stdout; fd 1 then points at stderr for everything else."""

    def __init__(self) -> None:
        sys.stdout.flush()
        self.stream: TextIO = os.fdopen(os.dup(1), "w", buffering=1)
        os.dup2(2, 1)

    def send(self, message: dict[str, Any]) -> None:
        self.stream.write(encode(message))
        self.stream.flush()


def serve(channel: Channel, handler: Any, requests: TextIO) -> None:
    # The functions that read, answer and reply are taken once, here, from the classes: a subject that
    # replaces one afterwards (on the object or its class) does not get between a request and its
    # reply, and the state guard, run inside the request that ends each subject, reports it
    lines = iter(requests)
    read, handle, send, loads = type(lines).__next__, type(handler).handle, type(channel).send, json.loads
    while True:
        try:
            line = read(lines)
        except StopIteration:
            return
        if not line.strip():
            continue
        try:
            request = loads(line)
        except ValueError:
            send(channel, {"type": "error", "message": f"unreadable request {line[:100]!r}"})
            continue
        if request.get("op") == "exit":
            return
        reply = handle(handler, request)
        send(channel, reply)
        if reply.get("healthy") is False:
            return  # a broken CUDA context: exit, the parent starts a fresh worker
