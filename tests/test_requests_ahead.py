"""The caller keeps the next subject's request in the worker's channel while the worker judges one
(cudabench.engine.scheduler), and a lane's judge checks a variant's random shapes while the other lanes
take other subjects first (cudabench.engine.shared_shapes)."""

import collections
import sys
from pathlib import Path

from cudabench.engine.plan import Planned, RunOptions, Task
from cudabench.engine.protocol import read_request
from cudabench.engine.scheduler import Runner
from cudabench.engine.workers import ProcessWorker
from cudabench.measure.stop import FixedCount
from cudabench.results.exporters.json_document import result_to_dict
from cudabench.results.records.model import Case, IntegrityCheck, Result
from cudabench.spec.family import Variant

FAKE = [sys.executable, str(Path(__file__).parent / "fake_worker.py")]


class OrderedWorker:
    """A worker that is told (`send`) and answers in order (`wait`), writing down both."""

    def __init__(self, log: list, lost_after: str = "", build_fails: bool = False) -> None:
        self.log, self.lost_after, self.build_fails = log, lost_after, build_fails
        self.pending: collections.deque = collections.deque()

    def send(self, message):
        self.log.append(("send", message.get("subject", message["op"])))
        self.pending.append(message)

    def wait(self, timeout, on_status=None):
        message = self.pending.popleft()
        name = message.get("subject", message["op"])
        self.log.append(("answer", name))
        if message["op"] == "hello":
            return {"type": "ready", "environment": {"gpu": "fake"}}
        if message["op"] == "build":
            if self.build_fails:
                return {"ok": False, "message": "nvcc: error"}
            return {"ok": True, "seconds": 0.0, "cache_hit": True}
        request = read_request(message)
        result = Result(request.case, request.subject, request.role)
        if name == self.lost_after:
            return {"type": "result", "result": result_to_dict(result), "healthy": False}
        return {"type": "result", "result": result_to_dict(result)}

    def request(self, message, timeout, on_status=None):
        self.send(message)
        return self.wait(timeout)

    def close(self):
        pass


def task(registry, *names, family="add2", shape=(("n", 64),), baselines=()):
    variants = tuple(Variant(n, "fake", bind=lambda ext: None) for n in names)
    return Task(registry.family(family), (Case(family, shape),), variants, baselines)


def subjects(log):
    return [(what, name) for what, name in log if name.startswith("v")]


def test_the_next_request_waits_in_the_workers_channel_while_it_judges_one(registry):
    log = []
    with Runner(RunOptions(rule=FixedCount(3)), lambda gpu: OrderedWorker(log)) as runner:
        results = runner.run([task(registry, "v1", "v2", "v3")])
    assert [r.subject for r in results] == ["v1", "v2", "v3"]
    assert subjects(log) == [("send", "v1"), ("send", "v2"), ("answer", "v1"), ("send", "v3"),
                             ("answer", "v2"), ("answer", "v3")]


def test_a_request_sent_ahead_to_a_worker_that_is_replaced_runs_on_the_next_one(registry):
    """v1's answer says its worker is broken: v2, sent behind it, goes back to the queue and runs on a
    fresh worker, once."""
    log, started = [], []

    def start(gpu):
        started.append(1)
        return OrderedWorker(log, lost_after="v1" if len(started) == 1 else "")

    with Runner(RunOptions(rule=FixedCount(3)), start) as runner:
        results = runner.run([task(registry, "v1", "v2", "v3")])
    assert [r.subject for r in results] == ["v1", "v2", "v3"] and len(started) == 2
    assert [name for what, name in subjects(log) if what == "answer"] == ["v1", "v2", "v3"]


def test_crashes_and_hangs_behind_requests_sent_ahead_are_each_blamed_alone(registry):
    """The real protocol (tests/fake_worker.py): a worker that exits while a request waits behind the
    one it serves; the request behind it runs on the next worker and hangs there on its own account."""
    options = RunOptions(rule=FixedCount(3), timeout=2.0)
    with Runner(options, lambda gpu: ProcessWorker(FAKE)) as runner:
        results = runner.run([task(registry, "a", "exit", "hang", "b", "c")])
    status = {r.subject: (r.status, r.error) for r in results}
    assert status["a"][0] == status["b"][0] == status["c"][0] == "ok"
    assert "exited with code 3" in status["exit"][1] and "timed out after 2 s" in status["hang"][1]


def test_other_lanes_take_other_subjects_while_one_judge_checks_a_variants_random_shapes():
    runner = Runner(RunOptions(), lambda gpu: None)
    first, second = object(), object()
    v = lambda n: (n, Planned("add2", Case("add2", (("n", n),)), "v", "variant"))  # noqa: E731
    queue = [v(64), v(128), (2, Planned("add2", Case("add2", (("n", 64),)), "w", "variant")), v(256)]
    assert runner._take(first, queue, None, "")[1].case.shape == (("n", 64),)
    taken = runner._take(second, queue, None, "")
    assert taken[1].name == "w"  # v's shapes are being checked by the first lane's judge
    verdict = Result(taken[1].case, "v", "variant", integrity=(IntegrityCheck("shapes", "pass", "right"),))
    runner._shapes.note(Planned("add2", Case("add2", (("n", 64),)), "v", "variant"), verdict)
    assert runner._take(second, queue, None, "")[1].case.shape == (("n", 128),)  # a verdict: any lane


def test_a_lane_takes_a_subject_being_checked_elsewhere_when_nothing_else_is_left():
    runner = Runner(RunOptions(), lambda gpu: None)
    first, second = object(), object()
    queue = [(n, Planned("add2", Case("add2", (("n", n),)), "v", "variant")) for n in (64, 128)]
    runner._take(first, queue, None, "")
    assert runner._take(second, queue, None, "")[1].case.shape == (("n", 128),)


def test_a_warm_worker_that_dies_with_a_request_behind_the_one_it_serves(registry, tmp_path, monkeypatch):
    """The default path (a warm worker behind its socket, tests/fake_warm.py): `exit` ends the warm worker
    while `b`'s request waits in its socket; `b` goes back to the queue and runs once, on the next warm
    worker, and so does everything after it."""
    from cudabench.engine.warm_client import SocketWorker, stop_workers

    monkeypatch.setenv("CUDABENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    handler = f"{Path(__file__).parent / 'fake_warm.py'}:FakeWarmHandler"
    try:
        with Runner(RunOptions(rule=FixedCount(3), timeout=30.0),
                    lambda gpu: SocketWorker(None, (), handler=handler)) as runner:
            results = runner.run([task(registry, "a", "exit", "b", "c")])
    finally:
        stop_workers()
    by = {r.subject: r for r in results}
    assert [r.subject for r in results] == ["a", "exit", "b", "c"]
    assert by["a"].status == by["b"].status == by["c"].status == "ok" and by["exit"].status == "ERROR"
    pid = lambda r: r.host.split("-")[1]  # noqa: E731  warm-<pid>-<generation>
    assert pid(by["a"]) != pid(by["b"]) == pid(by["c"])


def test_a_request_goes_ahead_only_for_the_subject_next_in_the_plan(registry):
    """On one GPU the plan's order is kept: a variant whose family is not loaded yet is not passed over
    for a subject behind it (a build is a request of its own, so it cannot go ahead)."""
    log, eager = [], (registry.family("sincos").baseline("eager"),)
    tasks = [task(registry, "v1"), task(registry, "v2", family="sincos", shape=(("n", 64),), baselines=eager),
             task(registry, "v3", family="sincos", shape=(("n", 128),), baselines=eager)]
    with Runner(RunOptions(rule=FixedCount(3)), lambda gpu: OrderedWorker(log)) as runner:
        results = runner.run(tasks)
    answered = [(r.subject, r.case.shape) for r in results]
    assert [name for what, name in log if what == "answer" and name not in ("hello", "build")] == [s for s, _ in answered]
    assert answered == [("v1", (("n", 64),)), ("v2", (("n", 64),)), ("eager", (("n", 64),)),
                        ("v3", (("n", 128),)), ("eager", (("n", 128),))]


def test_with_several_gpus_nothing_goes_ahead_while_a_lane_is_free_or_still_starting():
    class Ready:
        worker = object()

        def can_send(self, family=None):
            return True

        def send(self, request):
            self.sent = request

    runner = Runner(RunOptions(), lambda gpu: None, gpus=[None, None])
    lane, other = Ready(), object()
    queue = [(n, Planned("add2", Case("add2", (("n", n),)), "v", "variant")) for n in range(10)]
    runner._active, runner._busy = {lane, other}, {lane}  # the other lane is free, or still starting
    assert runner._send_ahead(lane, queue, {}, "") is None and len(queue) == 10
    runner._busy = {lane, other}
    assert runner._send_ahead(lane, queue, {}, "")[0] == 0 and lane.sent["op"] == "subject"
    runner._active, runner._busy = {lane}, {lane}  # the other lane left the run (its worker could not start)
    assert runner._send_ahead(lane, queue, {}, "")[0] == 1
    del queue[4:]  # the last two subjects a lane go to whichever lane is free first
    assert runner._send_ahead(lane, queue, {}, "") is None


def test_a_failed_build_leaves_no_random_shapes_claim(registry):
    with Runner(RunOptions(rule=FixedCount(3)), lambda gpu: OrderedWorker([], build_fails=True)) as runner:
        results = runner.run([task(registry, "v1", "v2")])
    assert all(r.skipped.startswith("build failed") for r in results) and runner._shapes._checking == {}


def test_closing_a_worker_with_a_request_behind_the_one_it_serves_kills_it_at_once():
    """It would start the subject behind before it read the exit (Ctrl-C on one GPU)."""
    import time

    w = ProcessWorker(FAKE)
    assert w.request({"op": "hello"}, 30)["type"] == "ready"
    case = {"family": "add2", "shape": {"n": 64}, "direction": "fwd"}
    for _ in range(2):
        w.send({"op": "subject", "family": "add2", "case": case, "subject": "sleep-3", "role": "variant",
                "settings": {}})
    start = time.monotonic()
    w.close()
    assert time.monotonic() - start < 2.0 and w.proc.poll() is not None
