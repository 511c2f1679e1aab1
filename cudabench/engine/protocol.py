"""The worker protocol: one JSON object per line. The parent writes requests to the worker's stdin;
the worker writes its messages to its (original) stdout, each line prefixed with MARK so that
anything else on that stream — a kernel's printf, a profiler's own lines — is told apart and kept
as log text. A marked line that is not a JSON object with a "type" is a protocol error.

Requests (field "op"): hello, build, subject, sync-modes, profile, exit.
Messages (field "type"): ready, status (progress text), built, result, sync-modes, profile, error.
Every reply also says "healthy": false when the worker's CUDA context is broken and it exits."""

from __future__ import annotations

import json
from typing import Any, Optional

MARK = "@cudabench-worker "


class ProtocolError(Exception):
    """The worker wrote something that is not a message."""


def encode(message: dict[str, Any]) -> str:
    return MARK + json.dumps(message) + "\n"


def decode(line: str) -> Optional[dict[str, Any]]:
    """The message on a line, None for a line that is not a message (log text)."""
    if not line.startswith(MARK):
        return None
    try:
        message = json.loads(line[len(MARK):])
    except ValueError:
        raise ProtocolError(f"a garbled message: {line[:200].rstrip()!r}") from None
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise ProtocolError(f"a message without a type: {line[:200].rstrip()!r}")
    return message
