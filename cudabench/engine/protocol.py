"""The worker protocol: one JSON object per line. The parent writes requests to the worker's stdin;
the worker writes its messages to its (original) stdout, each line prefixed with MARK so that
anything else on that stream — a kernel's printf, a profiler's own lines — is told apart and kept
as log text. A marked line that is not a JSON object with a "type" is a protocol error.

Requests (field "op"): hello, build, subject, sync-modes, profile, exit (hello and subject are records
below, built by `hello` and `subject_request` for the scheduler and the cluster alike).
Messages (field "type"): ready, status (progress text), built, result, sync-modes, profile, error.
Every reply also says "healthy": false when the worker's CUDA context is broken and it exits."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from cudabench.measure.settings import Settings
from cudabench.results.records.codec import to_data
from cudabench.results.records.model import Case

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


# ---- requests: one record each, one codec (cudabench.results.records.codec), built in one place ----

@dataclass(frozen=True)
class Hello:
    """The first request: where the kernel families are, and what the run wants of the worker."""

    kernels_dirs: tuple[str, ...]
    ceilings: bool = True                 # measure the device's ceilings (a run that times)
    nvtx: bool = False
    nvtx_iterations: bool = False
    settings: tuple[tuple[str, str], ...] = ()   # the run's settings, recorded in its environment


@dataclass(frozen=True)
class SubjectRequest:
    """Check, time and judge one subject on one case."""

    family: str
    case: Case
    subject: str
    role: str
    settings: Settings


OPS = {Hello: "hello", SubjectRequest: "subject"}


def request(record: Any) -> dict[str, Any]:
    """A request record as the worker reads it: {"op": ..., its fields as plain data}."""
    return {"op": OPS[type(record)], **to_data(record)}


def hello(kernels_dirs: Sequence[Any], options: Any, settings: Optional[dict[str, str]] = None) -> dict[str, Any]:
    """The hello of a run with these RunOptions (cudabench.engine.plan)."""
    return request(Hello(tuple(str(d) for d in kernels_dirs), options.time, options.nvtx, options.nvtx_iterations,
                         tuple((settings or {}).items())))


def subject_request(subject: Any, options: Any, seed: int) -> dict[str, Any]:
    """The request for one planned subject (cudabench.engine.plan.Subject) of a run."""
    return request(SubjectRequest(subject.family.name, subject.case, subject.name, subject.role,
                                  options.settings(seed)))
