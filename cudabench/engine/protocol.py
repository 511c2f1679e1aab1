"""The worker protocol: one JSON object per line. The parent writes requests to the worker's stdin;
the worker writes its messages to its (original) stdout, each line prefixed with MARK so that
anything else on that stream — a kernel's printf, a profiler's own lines — is told apart and kept
as log text. A marked line that is not a JSON object with a "type" is a protocol error.

Requests (field "op"): hello, build, subject, sync-modes, transfer, profile, exit: one record each
below, written by `request` and read back by `read_request` (one codec, cudabench.results.records.codec);
no caller writes a request by hand.
Messages (field "type"): ready, status (progress text), built, result, sync-modes, profile, error.
Every reply also says "healthy": false when the worker's CUDA context is broken and it exits."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from cudabench.measure.settings import Settings
from cudabench.results.records.codec import from_data, to_data
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
    timeout: float = 3600.0     # the subject's process is killed past it (the judge reports why)
    shapes: tuple[str, ...] = ()  # (verdict, detail): its random shapes, checked by another GPU's judge


@dataclass(frozen=True)
class Build:
    """Build (or find in the cache) a family's extension, in the subject process."""

    family: str
    arch: Optional[str] = None


@dataclass(frozen=True)
class SyncModes:
    """`compare-sync-modes`: one subject timed under each way of waiting for the GPU."""

    family: str
    case: Case
    subject: str
    seed: int
    iterations: int
    warmup: int
    busy_ms: float
    timeline: int = 0           # iterations drawn on a timeline (0: none)
    role: str = "variant"


@dataclass(frozen=True)
class Transfer:
    """`compare-transfer`: host-to-device copies of these sizes by every method, and an overlap."""

    sizes: tuple[int, ...]
    iterations: int
    overlap_size: int


@dataclass(frozen=True)
class Profile:
    """`profile`: the one request of a worker started under a profiler (its hello inside it)."""

    hello: Hello
    family: str
    case: Case
    subject: str
    seed: int
    tool: str
    iterations: int
    role: str = "variant"
    trace: Optional[str] = None


@dataclass(frozen=True)
class Exit:
    """End the worker."""


OPS = {Hello: "hello", SubjectRequest: "subject", Build: "build", SyncModes: "sync-modes", Transfer: "transfer",
       Profile: "profile", Exit: "exit"}
RECORDS = {op: record for record, op in OPS.items()}


def request(record: Any) -> dict[str, Any]:
    """A request record as the worker reads it: {"op": ..., its fields as plain data}."""
    return {"op": OPS[type(record)], **to_data(record)}


def read_request(data: Any) -> Any:
    """The request record a worker was sent; ValueError for an unknown op or a missing field."""
    record = RECORDS.get(data.get("op")) if isinstance(data, dict) else None
    if record is None:
        raise ValueError(f"unknown request {data.get('op') if isinstance(data, dict) else data!r}")
    return from_data(record, data)


def hello(kernels_dirs: Sequence[Any], options: Any, settings: Optional[dict[str, str]] = None) -> dict[str, Any]:
    """The hello of a run with these RunOptions (cudabench.engine.plan)."""
    return request(Hello(tuple(str(d) for d in kernels_dirs), options.time, options.nvtx, options.nvtx_iterations,
                         tuple((settings or {}).items())))


def subject_request(subject: Any, options: Any, seed: int, shapes: tuple[str, ...] = ()) -> dict[str, Any]:
    """The request for one planned subject (cudabench.engine.plan.Planned) of a run."""
    return request(SubjectRequest(subject.family, subject.case, subject.name, subject.role,
                                  options.settings(seed), options.timeout, tuple(shapes)))
