"""The run's requests to workers are records with one codec, built in one place (engine/protocol.py)
for the scheduler and the cluster alike, and read back by the worker as it reads them."""

import json
from pathlib import Path

import pytest

from cudabench.engine.plan import RunOptions, plan, planned_run
from cudabench.engine.protocol import (Build, Exit, Hello, Profile, SyncModes, Transfer, hello, read_request,
                                       request, subject_request)
from cudabench.measure.stop import FixedCount
from cudabench.results.records.model import Case
from cudabench.spec.registry import discover

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "my_kernels"


def test_the_subject_request_reads_back_as_the_worker_reads_it():
    options = RunOptions(rule=FixedCount(7), seed=3, fuzz=0)
    [task] = plan(discover([EXAMPLES]), ["scale"], {"n": 1024}, options)
    subject = planned_run([task]).entries[0]
    request = subject_request(subject, options, 11)
    assert request["op"] == "subject" and request["subject"] == subject.name and request["role"] == subject.role
    read = read_request(json.loads(json.dumps(request)))  # as worker.Handler reads it
    assert read.case == subject.case and read.settings == options.settings(11) and read.timeout == options.timeout


def test_the_hello_carries_the_runs_choices():
    options = RunOptions(nvtx=True, time=False)
    message = hello([EXAMPLES], options, {"timing": "events"})
    assert message == {"op": "hello", "kernels_dirs": [str(EXAMPLES)], "ceilings": False, "nvtx": True,
                       "nvtx_iterations": False, "settings": {"timing": "events"}}


FAKE = [__import__("sys").executable, str(Path(__file__).parent / "fake_worker.py")]
SUBJECT = {"op": "subject", "family": "add2", "case": {"family": "add2", "shape": {"n": 8}, "direction": "fwd"},
           "role": "variant", "settings": {}}


def test_one_request_to_a_fresh_worker_as_the_lessons_ask():
    from cudabench.engine.workers import one_request

    heard = []
    ready, reply = one_request({"op": "hello"}, {**SUBJECT, "subject": "ok"}, 30, "result", "ok",
                               on_ready=heard.append, command=FAKE)
    assert ready["type"] == "ready" and heard == [ready] and reply["type"] == "result"


@pytest.mark.parametrize("subject, expected, fragment, code", [
    ("exit", "result", "exited with code 3", 2),          # lost: what could not be measured, and why
    ("ok", "sync-modes", "'type': 'result'", 1),           # an answer of another kind: the measurement failed
])
def test_one_request_says_what_could_not_be_measured(subject, expected, fragment, code):
    from cudabench.engine.workers import one_request
    from cudabench.errors import CudabenchError

    with pytest.raises(CudabenchError, match=fragment) as info:
        one_request({"op": "hello"}, {**SUBJECT, "subject": subject}, 30, expected, "the thing", command=FAKE)
    assert info.value.exit_code == code


def test_one_request_to_a_worker_that_cannot_start(monkeypatch):
    from cudabench.engine.workers import one_request
    from cudabench.errors import CudabenchError

    monkeypatch.setenv("FAKE_FAIL_START", "1")
    with pytest.raises(CudabenchError, match="no CUDA device"):
        one_request({"op": "hello"}, {**SUBJECT, "subject": "ok"}, 30, "result", "x", command=FAKE)


CASE = Case("timex", (("B", 8), ("C", 64), ("T", 256)), "fwdbwd", "bfloat16")


@pytest.mark.parametrize("record", [
    Hello(("kernels",), ceilings=False, nvtx=True, settings=(("timing", "events"),)),
    Build("timex", "sm_90a"), Build("timex"),
    SyncModes("timex", CASE, "timex-v4", 7, 10, 2, 5.0, timeline=3),
    Transfer((1024, 1 << 20), 5, 1 << 24),
    Profile(Hello(("k",), nvtx=True, nvtx_iterations=True), "timex", CASE, "timex-v4", 3, "torch", 4, trace="/t.json"),
    Exit(),
])
def test_every_request_is_a_record_the_worker_reads_back_whole(record):
    assert read_request(json.loads(json.dumps(request(record)))) == record


def test_a_request_the_worker_cannot_read_is_one_error_reply():
    from cudabench.engine.worker import Handler

    handler = Handler(device="cpu")
    for message in ({"op": "launch-missiles"}, {"op": "build"}, {"op": "transfer", "sizes": [1]}, {}):
        reply = handler.handle(message)
        assert reply["type"] == "error" and "unreadable request" in reply["message"], (message, reply)
