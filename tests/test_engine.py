"""The engine on the CPU with stand-in workers (tests/fake_worker.py speaks the real protocol): the
watchdog, crashes, garbage, and a run that records each failure against its own subject and goes
on with a fresh worker."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cudabench.engine.plan import RunOptions, Task
from cudabench.engine.protocol import MARK, ProtocolError, decode, encode
from cudabench.engine.scheduler import Runner, WorkerStartError
from cudabench.engine.workers import ProcessWorker, WorkerLost, describe_exit
from cudabench.measure.stop import FixedCount, rule_from_dict, rule_to_dict
from cudabench.results.records.model import Case
from cudabench.spec.family import Variant

FAKE = [sys.executable, str(Path(__file__).parent / "fake_worker.py")]
CASE = {"family": "add2", "shape": {"n": 64}, "direction": "fwd"}


def subject(name):
    return {"op": "subject", "family": "add2", "case": CASE, "subject": name, "role": "variant", "settings": {}}


@pytest.fixture
def worker():
    w = ProcessWorker(FAKE)
    assert w.request({"op": "hello"}, 30)["type"] == "ready"
    yield w
    w.close()


def test_protocol_round_trip_and_garbage():
    assert decode(encode({"type": "status", "text": "x"})) == {"type": "status", "text": "x"}
    assert decode("plain log line\n") is None
    with pytest.raises(ProtocolError, match="garbled"):
        decode(MARK + "{nope\n")
    with pytest.raises(ProtocolError, match="without a type"):
        decode(MARK + "[1, 2]\n")


def test_stop_rules_cross_the_process_boundary():
    assert rule_from_dict(rule_to_dict(FixedCount(7))) == FixedCount(7)


def test_a_healthy_subject_answers_with_status_on_the_side(worker):
    seen = []
    reply = worker.request(subject("chatty"), 30, seen.append)
    assert reply["type"] == "result" and reply["result"]["status"] == "ok"
    assert seen == ["running chatty"]
    assert "a kernel's printf, not a message" in worker.tail  # log text, not a protocol error


def test_watchdog_kills_a_hanging_worker_and_its_group(worker):
    start = time.monotonic()
    with pytest.raises(WorkerLost, match="timed out after 1 s"):
        worker.request(subject("hang"), 1.0)
    assert time.monotonic() - start < 10
    assert worker.proc.poll() is not None  # killed, not left running


@pytest.mark.parametrize("name, reason", [("exit", "exited with code 3: about to exit"),
                                          ("segv", "was killed by SIGSEGV"),
                                          ("garbage", "broke the protocol: a garbled message")])
def test_a_dying_or_garbling_worker_says_how(worker, name, reason):
    with pytest.raises(WorkerLost, match=reason):
        worker.request(subject(name), 30)


def test_a_dying_workers_last_words_survive_a_late_stderr_reader(monkeypatch):
    # A busy machine, made certain: its stdout's end is seen before its stderr is read.
    read_log = ProcessWorker._read_log
    monkeypatch.setattr(ProcessWorker, "_read_log", lambda self, stream: (time.sleep(1.0), read_log(self, stream)))
    w = ProcessWorker(FAKE)
    try:
        with pytest.raises(WorkerLost, match="exited with code 3: about to exit"):
            w.request(subject("exit"), 30)
    finally:
        w.close()


def test_waiting_for_a_dead_workers_last_words_is_bounded(monkeypatch):
    # A process that left its group holds the dead worker's stderr open: no end of it ever comes.
    monkeypatch.setattr("cudabench.engine.workers.DRAIN_TIMEOUT", 0.5)
    escape = ("import os, subprocess; p = subprocess.Popen(['sleep', '60'], stdout=subprocess.DEVNULL, "
              "start_new_session=True); print(p.pid, flush=True); os._exit(3)")
    w = ProcessWorker([sys.executable, "-c", escape])
    start = time.monotonic()
    try:
        with pytest.raises(WorkerLost, match="exited with code 3"):
            w.wait(30)
        w.close()
        assert time.monotonic() - start < 10
    finally:
        for line in list(w.tail):
            if line.strip().isdigit():
                os.kill(int(line), signal.SIGKILL)


def test_exit_descriptions():
    assert describe_exit(-9) == "was killed by SIGKILL" and describe_exit(2) == "exited with code 2"


def fake_task(registry, *names):
    family = registry.family("add2")
    variants = tuple(Variant(n, "fake", bind=lambda ext: None) for n in names)
    return Task(family, (Case("add2", (("n", 64),)),), variants, ())


def test_run_survives_crash_and_hang_and_blames_each_subject_alone(registry):
    started = []

    def start(gpu):
        started.append(1)
        return ProcessWorker(FAKE)

    options = RunOptions(rule=FixedCount(3), timeout=2.0)
    results = []
    with Runner(options, start, on_result=results.append) as runner:
        runner.run([fake_task(registry, "honest", "exit", "hang", "segv", "garbage", "broken", "after", "chatty")])
    status = {r.subject: (r.status, r.error) for r in results}
    assert status["honest"] == ("ok", "") and status["after"] == ("ok", "") and status["chatty"] == ("ok", "")
    assert status["exit"][0] == "ERROR" and "exited with code 3" in status["exit"][1]
    assert status["hang"][0] == "ERROR" and "timed out after 2 s (the kernel may not terminate)" in status["hang"][1]
    assert "SIGSEGV" in status["segv"][1] and "garbled" in status["garbage"][1]
    assert status["broken"] == ("ERROR", "CUDA error: an illegal memory access was encountered")
    assert len(results) == 8  # every subject recorded, in order
    assert [r.subject for r in results] == ["honest", "exit", "hang", "segv", "garbage", "broken", "after", "chatty"]
    assert len(started) == 6  # a fresh worker after each of the five failures that end a worker


def test_results_before_an_interrupt_are_kept(registry):
    results = []

    def record(r):
        results.append(r)
        if len(results) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        with Runner(RunOptions(), lambda gpu: ProcessWorker(FAKE), on_result=record) as runner:
            runner.run([fake_task(registry, "a", "b", "c")])
    assert [r.subject for r in runner.results] == ["a", "b"]
    assert runner.lanes[0].worker is None  # closed on the way out


def test_a_worker_that_cannot_start_is_a_clear_error(monkeypatch):
    monkeypatch.setattr("cudabench.engine.lane.HELLO_TIMEOUT", 1.0)
    runner = Runner(RunOptions(), lambda gpu: ProcessWorker([*FAKE, "slow-start"]))
    with pytest.raises(WorkerStartError, match="could not start: timed out"):
        runner.start()


def test_a_launched_worker_starts_while_the_caller_plans_and_is_closed_if_never_used(registry):
    runner = Runner(RunOptions(), lambda gpu: ProcessWorker(FAKE))
    runner.launch()
    runner.lanes[0]._launching.join()  # the launch's own thread: process started, hello sent
    pending = runner.lanes[0]._starting
    assert pending is not None and pending.proc.poll() is None
    runner.start()  # the hello sent at launch is answered now
    assert runner.environment["gpu"] == "fake GPU" and runner.lanes[0]._starting is None
    assert runner.waited["start-up"] > 0
    runner.close()
    unused = Runner(RunOptions(), lambda gpu: ProcessWorker(FAKE))
    unused.launch()
    unused.lanes[0]._launching.join()
    proc = unused.lanes[0]._starting.proc
    unused.close()  # e.g. planning raised a user error: the worker must not outlive the command
    assert proc.poll() is not None


def test_a_worker_still_starting_when_the_run_is_closed_is_closed_by_its_launch():
    """Ctrl-C while a warm worker is still being reached: what the launch gets afterwards is closed."""
    import threading

    reached, closed = threading.Event(), []

    class Slow:
        def send(self, message):
            raise AssertionError("a closed run sends no hello")

        def close(self):
            closed.append(True)

    def start(gpu):
        reached.wait(10)
        return Slow()

    runner = Runner(RunOptions(), start)
    runner.launch()
    runner.close()
    reached.set()
    runner.lanes[0]._launching.join(10)
    assert closed == [True] and runner.lanes[0]._starting is None


def test_lanes_start_their_workers_at_once():
    """Each lane reaches its worker in its own thread: a warm worker that must first start (torch,
    a CUDA context: seconds) does not hold up the next GPU's."""
    import threading

    from cudabench.engine.gpus import parse_listing

    inside, both = [], threading.Event()

    def start(gpu):
        inside.append(gpu.index)
        if len(inside) == 2:
            both.set()
        assert both.wait(10), "the second lane's worker was not reached while the first's was starting"
        return ProcessWorker(FAKE)

    gpus = parse_listing("0, NVIDIA H100, GPU-a\n1, NVIDIA H100, GPU-b\n")
    with Runner(RunOptions(), start, gpus=gpus) as runner:
        runner.launch()
        for lane in runner.lanes:
            lane.ready()
    assert sorted(inside) == [0, 1]


def test_the_first_lane_builds_a_family_alone_and_the_others_load_it_side_by_side():
    """On four GPUs each lane loads each family in its own subject process (which may still be
    starting: seconds). Only the first build needs to be alone (a compile, then the cache); the
    other lanes loading it one after another held the last GPU up by their sum."""
    import threading

    from cudabench.engine.gpus import parse_listing

    gpus = parse_listing("".join(f"{i}, NVIDIA H100, GPU-{i}\n" for i in range(4)))
    runner = Runner(RunOptions(), lambda gpu: None, gpus=gpus)
    spans, running, most = [], [0], [0]
    lock = threading.Lock()

    def slow_build(family, arch):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        start = time.perf_counter()
        time.sleep(0.3)
        with lock:
            running[0] -= 1
            spans.append((start, time.perf_counter()))
        return ""

    for lane in runner.lanes:
        lane.build = slow_build
    threads = [threading.Thread(target=runner._build, args=(lane, "timex")) for lane in runner.lanes]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    first, *rest = sorted(spans)
    assert len(spans) == 4 and all(start >= first[1] for start, _ in rest)  # the first built alone
    assert most[0] == 3  # then the other three at once


def test_a_failed_first_build_is_every_lanes_answer():
    from cudabench.engine.gpus import parse_listing

    runner = Runner(RunOptions(), lambda gpu: None, gpus=parse_listing("0, H100, a\n1, H100, b\n"))
    calls = []
    for lane in runner.lanes:
        lane.build = lambda family, arch: calls.append(family) or "nvcc: error"
    assert [runner._build(lane, "timex") for lane in runner.lanes] == ["nvcc: error"] * 2
    assert calls == ["timex"]


def test_planning_in_the_parent_does_not_import_torch():
    """The worker starts before the parent plans; importing torch first (seconds on a cold machine)
    would put that import on the critical path again."""
    code = ("import sys\n"
            "from cudabench.cli import app, run\n"
            "from cudabench.engine import plan, scheduler, suite, workers\n"
            "from cudabench.measure.settings import Settings\n"
            "from cudabench.results.records.model import TIMINGS\n"
            "from cudabench.engine import suite_file\n"
            "from cudabench.spec import shapes\n"
            "run.gpu_likely()\n"
            "print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_timer_names_match_the_timers():
    from cudabench.measure.timers import TIMERS
    from cudabench.engine import suite_file as config
    from cudabench.results.records.model import TIMINGS

    assert set(TIMINGS) == set(TIMERS)
    assert all(TIMERS[name].describes == TIMINGS[name] for name in TIMINGS)
    with pytest.raises(Exception, match="one of sync, events, graph, cupti"):  # the suite files' check reads it
        config._TIMING_VALUES["timing"]("nope", "timing")


def test_a_worker_reports_any_exception_with_its_type_instead_of_ending_silently(capsys):
    """An AttributeError (say, in a spec's bind or a bug in a lesson) used to end the worker's loop
    through its final os._exit(0): the parent saw "exited with code 0" and no reason."""
    from cudabench.engine.worker import Handler

    handler = Handler(device="cpu")
    handler.bench = object()

    def broken(request):
        raise AttributeError("'profile' object has no attribute 'kineto_results'")

    handler._sync_modes = broken
    from cudabench.engine.protocol import SyncModes, request
    from cudabench.results.records.model import Case

    asked = SyncModes("add2", Case("add2", (("n", 8),)), "add2-v1", seed=1, iterations=3, warmup=1, busy_ms=1.0)
    reply = handler.handle(request(asked))
    assert reply["type"] == "error" and reply["healthy"] is True
    assert reply["message"] == "AttributeError: 'profile' object has no attribute 'kineto_results'"
    assert "Traceback" in capsys.readouterr().err  # the whole story stays in the worker's log


def test_waiting_for_a_fresh_subject_process_is_start_up_not_build():
    """A warm worker starts its next run's subject process when a run ends; a run straight after
    waits for it in its first build request. The time line says start-up for that part."""
    import time as clock

    from cudabench.engine.lane import Lane
    from cudabench.engine.subject_link import SubjectLink
    from cudabench.engine.workers import InlineWorker

    class SlowHello:
        def handle(self, request):
            if request["op"] == "hello":
                clock.sleep(0.3)
                return {"type": "ready"}
            return {"type": "build", "seconds": 0.0}

    link = SubjectLink(lambda: InlineWorker(SlowHello()), {"op": "hello"})
    link.ask({"op": "build"}, 10)
    assert link.take_waited() >= 0.3 and link.take_waited() == 0.0
    link.ask({"op": "build"}, 10)  # greeted: no wait any more
    assert link.take_waited() < 0.3

    class Judge:
        def request(self, message, timeout, on_status):
            if message["op"] == "hello":
                return {"type": "ready", "environment": {}}
            clock.sleep(0.35)
            return {"type": "built", "ok": True, "subject_start": 0.3, "seconds": 0.0, "cache_hit": True}

        def close(self):
            pass

    lane = Lane(Judge, {"op": "hello"})
    lane.ready()
    before = lane.waited["start-up"]
    assert lane.build("add2", None) == ""
    assert lane.waited["start-up"] - before == pytest.approx(0.3)
    assert 0.0 <= lane.waited["build"] < 0.3


def test_a_lane_asked_for_its_worker_after_the_run_was_closed_starts_none_that_outlives_it():
    """Ctrl-C while a lane's launch was still reaching its worker: the launch closes what it got, and
    a lane thread that then asks for the worker gets an error, not a second worker nobody closes."""
    import threading

    from cudabench.engine.lane import Lane, WorkerStartError

    reached, started, closed = threading.Event(), [], []

    class Fake:
        def __init__(self):
            self.n = len(started)
            started.append(self.n)

        def send(self, message):
            pass

        def close(self):
            closed.append(self.n)

    def start():
        reached.wait(10)
        return Fake()

    lane = Lane(start, {"op": "hello"})
    lane.launch()
    lane.close()
    reached.set()
    with pytest.raises(WorkerStartError):
        lane.ready()
    assert sorted(started) == sorted(closed)  # every worker started was closed


def test_a_shared_random_shapes_verdict_stays_among_the_judges_of_one_gpu_model():
    from cudabench.engine.plan import Planned
    from cudabench.engine.shared_shapes import SharedShapes
    from cudabench.results.records.model import IntegrityCheck, Result

    shared, s = SharedShapes(2), Planned("add2", Case("add2", (("n", 64),)), "v", "variant")
    shared.note(s, Result(s.case, "v", "variant", integrity=(IntegrityCheck("shapes", "pass", "right"),)), "H100")
    assert shared.for_request(s, "H100") == ("pass", "right") and shared.for_request(s, "A100") == ()


def test_a_variants_random_shapes_verdict_goes_to_the_other_gpus_judges():
    """The first verdict of each variant (precision, direction, input kind) goes with that variant's later
    requests, on any GPU; a baseline's requests and another variant's carry none."""
    from cudabench.engine.plan import Planned
    from cudabench.engine.protocol import read_request
    from cudabench.results.records.model import IntegrityCheck, Result

    class Lane:
        worker = None

        def __init__(self, verdict):
            self.verdict, self.requests = verdict, []

        def build(self, family, arch):
            return ""

        def ready(self):
            pass

        def on_status(self, text):
            pass

        def where(self):
            return {}

        def subject(self, request, timeout, lost, sent=False):
            self.requests.append(read_request(request))
            r = self.requests[-1]
            return Result(r.case, r.subject, r.role, integrity=(IntegrityCheck("shapes", *self.verdict),))

    runner = Runner(RunOptions(), lambda gpu: None)
    case = lambda n, direction="fwd": Case("add2", (("n", n),), direction)  # noqa: E731
    first, second = Lane(("fail", "wrong at n=3")), Lane(("pass", "also right at n=5"))
    runner._attempt(first, Planned("add2", case(64), "v", "variant"))
    runner._attempt(second, Planned("add2", case(128), "v", "variant"))
    runner._attempt(second, Planned("add2", case(128), "w", "variant"))
    runner._attempt(second, Planned("add2", case(128), "torch-add", "baseline"))
    runner._attempt(second, Planned("add2", case(128, "fwdbwd"), "v", "variant"))
    assert first.requests[0].shapes == ()
    assert [r.shapes for r in second.requests] == [("fail", "wrong at n=3"), (), (), ()]
