"""Warm workers on the CPU, with a stand-in judge (tests/fake_warm.py) behind the real socket, key,
folder and life cycle: start, reuse by a later invocation, idle exit, another version, a killed or
hung worker replaced, two invocations at once, a stale socket file, and the channel's refusals."""

import os
import signal
import socket
import stat
import sys
import threading
import time
from pathlib import Path

import pytest

from cudabench.engine import warm
from cudabench.engine.warm_client import (SocketWorker, WorkerFolderError, ask_once, running, stop_workers,
                                          warm_workers, worker_folder)
from cudabench.engine.workers import WorkerLost
from cudabench.results.exporters.json_document import result_from_dict

HANDLER = f"{Path(__file__).parent / 'fake_warm.py'}:FakeWarmHandler"
CASE = {"family": "add2", "shape": {"n": 64}, "direction": "fwd"}


@pytest.fixture(autouse=True)
def own_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDABENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    yield
    stop_workers()


def subject(name):
    return {"op": "subject", "family": "add2", "case": CASE, "subject": name, "role": "variant", "settings": {}}


def invocation(*names, idle=30.0, timeout=30.0):
    """What one `cudabench run` does with its worker: attach, hello, subjects, close."""
    w = SocketWorker(None, (), idle=idle, handler=HANDLER)
    try:
        assert w.request({"op": "hello"}, 30)["type"] == "ready"
        results = [result_from_dict(w.request(subject(n), timeout)["result"]) for n in names]
        return w.pid, results
    finally:
        w.close()


alive = running  # a zombie (exited, not yet reaped by whoever started it) is gone too


def wait_until(condition, seconds=15.0):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_a_later_invocation_reuses_the_warm_worker_and_it_shows_in_the_listing():
    first, _ = invocation("ok")
    second, [result] = invocation("ok")
    assert first == second and result.status == "ok"
    [(path, info)] = warm_workers()
    assert info["pid"] == first and info["runs"] == 2 and info["loaded"] == ["add2"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(worker_folder().stat().st_mode) == 0o700


def test_it_exits_after_its_idle_time_and_takes_its_socket_with_it():
    pid, _ = invocation("ok", idle=0.5)
    assert wait_until(lambda: not alive(pid))
    assert not list(worker_folder().glob("*.sock"))


def test_callers_that_pick_other_gpus_with_cuda_visible_devices_keep_a_worker_each(monkeypatch):
    """Two shells on one host, each on its own GPU by CUDA_VISIBLE_DEVICES, run in turn (or at once):
    neither replaces the other's warm worker."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    pids = {}
    for visible in ("1", "2", "1", "2", ""):
        if visible:
            monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
        else:
            monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
        pid, [result] = invocation("ok")
        assert result.status == "ok" and pids.setdefault(visible, pid) == pid
    assert len(set(pids.values())) == 3 and all(alive(p) for p in pids.values())
    assert sorted(p.name for p, _ in warm_workers()) == ["default-1.sock", "default-2.sock", "default.sock"]


def test_socket_names_fit_the_socket_path_and_keep_visible_device_sets_apart(monkeypatch, tmp_path):
    from cudabench.engine.warm_client import NAME_MAX, SOCKET_PATH_MAX, socket_name

    uuid = "GPU-0227ee44-9c6d-3b76-975c-ca64dd0b699a"
    values = [None, "", "1", "0,1", "0_1", "GPU-abc", "GPU-abc-", uuid, f"{uuid},{uuid[:-1]}1"]
    names = [socket_name(None, {} if v is None else {"CUDA_VISIBLE_DEVICES": v}) for v in values]
    names.append(socket_name(type("Gpu", (), {"uuid": uuid, "index": 0})(), {}))
    assert len(set(names)) == len(names) and all(len(n) <= NAME_MAX for n in names), names
    for length in (20, SOCKET_PATH_MAX - NAME_MAX - 6, SOCKET_PATH_MAX - NAME_MAX - 5, 150):
        cache = tmp_path / ("c" * (length - len(str(tmp_path)) - len("/workers") - 1))
        monkeypatch.setenv("CUDABENCH_CACHE", str(cache))
        longest = max(len(str(worker_folder() / f"{n}.sock")) for n in names)
        assert longest < 108, (length, longest)  # sun_path holds 107 bytes and a NUL


def test_a_caller_of_another_version_or_environment_replaces_it(monkeypatch):
    old, _ = invocation("ok")
    monkeypatch.setenv("CUDABENCH_SOMETHING", "else")
    new, [result] = invocation("ok")
    assert new != old and result.status == "ok" and wait_until(lambda: not alive(old))


def test_a_killed_worker_leaves_a_stale_socket_that_the_next_invocation_replaces():
    old, _ = invocation("ok")
    os.kill(old, signal.SIGKILL)
    assert wait_until(lambda: not alive(old))
    assert list(worker_folder().glob("*.sock"))  # left behind
    new, [result] = invocation("ok")
    assert new != old and result.status == "ok"


def test_a_worker_dying_as_the_caller_reaches_it_is_replaced():
    """A killed worker's socket accepts until its last thread has ended, then resets the connection:
    the caller reaches again and starts a fresh one."""
    path = worker_folder() / "default.sock"
    dying = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dying.bind(str(path))
    dying.listen(1)

    def die_on_first_caller():
        conn, _ = dying.accept()
        time.sleep(0.2)  # the caller's attach is unread: closing resets the connection
        dying.close()
        conn.close()
        path.unlink()

    thread = threading.Thread(target=die_on_first_caller, daemon=True)
    thread.start()
    pid, [result] = invocation("ok")
    thread.join(5)
    assert result.status == "ok" and alive(pid)


def test_a_hung_worker_is_killed_by_the_watchdog_and_the_next_invocation_starts_a_fresh_one():
    w = SocketWorker(None, (), handler=HANDLER)
    w.request({"op": "hello"}, 30)
    with pytest.raises(WorkerLost, match="timed out"):
        w.request(subject("hang"), 1.0)
    assert wait_until(lambda: not alive(w.pid))
    new, [result] = invocation("ok")
    assert new != w.pid and result.status == "ok"


def test_a_worker_that_dies_mid_run_is_lost_with_its_last_words():
    w = SocketWorker(None, (), handler=HANDLER)
    w.request({"op": "hello"}, 30)
    with pytest.raises(WorkerLost, match="stopped answering"):
        w.request(subject("exit"), 30)
    w.close()


def test_two_invocations_at_once_take_turns_on_one_worker():
    got = {}

    def run(tag):
        got[tag] = invocation("sleep-0.5")

    threads = [threading.Thread(target=run, args=(t,)) for t in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    (pa, [ra]), (pb, [rb]) = got["a"], got["b"]
    assert pa == pb
    spans = sorted(tuple(map(float, r.measurement.stop_reason.split())) for r in (ra, rb))
    assert spans[0][1] <= spans[1][0]  # one ran after the other, never both at once


def test_no_subject_process_serves_two_runs():
    """A subject that patches a library function another subject uses (a baseline's conv1d) is not
    seen by the state guard; a later run never shares its process."""
    _, [bad, after_in_same_run] = invocation("invalid", "ok")
    _, [later] = invocation("ok")
    _, [even_later] = invocation("ok")
    assert bad.status == "INVALID"
    generation = lambda r: r.host.rsplit("-", 1)[1]  # noqa: E731
    assert generation(after_in_same_run) == generation(bad)
    assert len({generation(bad), generation(later), generation(even_later)}) == 3


def test_a_worker_that_cannot_serve_here_does_not_stay(monkeypatch):
    monkeypatch.setenv("FAKE_FAIL_START", "1")
    w = SocketWorker(None, (), handler=HANDLER)
    assert w.request({"op": "hello"}, 30)["type"] == "error"
    w.close()
    assert wait_until(lambda: not alive(w.pid))


def test_stop_ends_every_warm_worker():
    pid, _ = invocation("ok")
    assert stop_workers() == [(pid, False)] and not alive(pid) and warm_workers() == []


def test_a_folder_others_can_enter_is_refused():
    folder = worker_folder()
    folder.chmod(0o755)
    try:
        with pytest.raises(WorkerFolderError, match="not private"):
            worker_folder()
    finally:
        folder.chmod(0o700)


def test_a_peer_of_another_user_is_refused(tmp_path, monkeypatch):
    path = worker_folder() / "peer.sock"
    path.unlink(missing_ok=True)  # the short stand-in folder outlives tmp_path: an earlier run's socket
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)
    monkeypatch.setattr(warm, "peer_uid", lambda conn: os.getuid() + 1)
    server = warm.WarmWorker(listener, "key", warm.load_handler(HANDLER), idle=5.0)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    reply = ask_once(path, {"op": "info"})
    assert reply["type"] == "error" and "own user only" in reply["message"]
    listener.close()
    thread.join(10)
    assert not thread.is_alive()


def test_the_workers_command_shows_them_and_stops_them():
    from typer.testing import CliRunner

    from cudabench.cli.app import app

    pid, _ = invocation("ok")
    shown = CliRunner().invoke(app, ["workers"])
    assert shown.exit_code == 0 and str(pid) in shown.output and "fake GPU" in shown.output
    assert "add2" in shown.output
    stopped = CliRunner().invoke(app, ["workers", "--stop"])
    assert stopped.exit_code == 0 and f"pid {pid}" in stopped.output and not alive(pid)


def test_run_uses_warm_workers_unless_told_not_to(monkeypatch):
    from cudabench.engine.start import start_runner
    from cudabench.engine.plan import RunOptions
    from cudabench.engine.workers import ProcessWorker

    made = []
    monkeypatch.setattr("cudabench.engine.warm_client.SocketWorker",
                        lambda gpu, dirs, env, idle: made.append(("warm", idle)) or "warm")
    monkeypatch.setattr(ProcessWorker, "__init__", lambda self, command, env=None: made.append(("fresh", command[-1])))
    monkeypatch.setenv("CUDABENCH_WORKER_IDLE", "42")
    for choice, env in ((None, "1"), (None, "0"), (True, "0"), (False, "1")):
        monkeypatch.setenv("CUDABENCH_WARM", env)
        runner = start_runner(RunOptions(), [], warm=choice)
        runner.lanes[0].start_worker()
    assert made == [("warm", 42.0), ("fresh", "cudabench.engine.worker"), ("warm", 42.0),
                    ("fresh", "cudabench.engine.worker")]


class StandInSubject:
    """A subject process as the judge's SubjectLink sees it: what it was sent and asked, and whether
    it was closed."""

    def __init__(self, n=1):
        self.n, self.sent, self.asked, self.closed = n, [], [], False

    def send(self, message):
        self.sent.append(message)

    def wait(self, timeout, on_status=None):
        return {"type": "ready"}

    def request(self, message, timeout, on_status=None):
        self.asked.append(message)
        return {"type": "ready"} if message["op"] == "hello" else {"type": "ok", "by": self.n}

    def close(self):
        self.closed = True


def test_the_judge_works_while_the_subject_process_answers_and_always_takes_the_answer():
    """ask_while: the request goes out, the judge's own work (a new draw) runs while the subject process
    answers, then its answer is taken, also when that work fails (else the next request would read this
    one's answer); a worker in the judge's own process answers first."""
    from cudabench.engine.subject_link import SubjectLink
    from cudabench.engine.workers import InlineWorker, WorkerLost
    from cudabench.measure.judge import SubjectLost

    log = []

    class Piped(StandInSubject):
        lost, last = False, ""

        def send(self, message):
            self.last = message["op"]
            if self.last != "hello":
                log.append(("sent", self.last))

        def wait(self, timeout, on_status=None):
            if self.last == "hello":
                return {"type": "ready"}
            log.append(("answered",))
            if self.lost:
                raise WorkerLost("it died")
            return {"type": "poison"}

    worker = Piped()
    link = SubjectLink(lambda: worker, {"op": "hello"})
    assert link.ask_while({"op": "poison"}, 10, lambda: log.append(("work",)) or 7) == ({"type": "poison"}, 7)
    assert log == [("sent", "poison"), ("work",), ("answered",)]
    log.clear()
    with pytest.raises(ZeroDivisionError):
        link.ask_while({"op": "poison"}, 10, lambda: 1 / 0)
    assert log == [("sent", "poison"), ("answered",)]
    worker.lost = True
    with pytest.raises(SubjectLost, match="it died"):
        link.ask_while({"op": "poison"}, 10, lambda: None)
    assert link.worker is None  # dropped: the next subject gets a fresh process

    class Handler:
        def handle(self, request):
            if request["op"] == "hello":
                return {"type": "ready"}
            log.append(("handled", request["op"]))
            return {"type": request["op"]}

    log.clear()
    inline = SubjectLink(lambda: InlineWorker(Handler()), {"op": "hello"})
    assert inline.ask_while({"op": "poison"}, 10, lambda: log.append(("work",)) or 3) == ({"type": "poison"}, 3)
    assert log == [("handled", "poison"), ("work",)]


def test_a_subject_process_started_for_the_next_run_gets_that_runs_hello():
    """It was started (and greeted) with the last run's hello; a run with other options (--nvtx, say)
    sends its own before the first subject."""
    from cudabench.engine.subject_link import SubjectLink

    worker = StandInSubject()
    link = SubjectLink(lambda: worker, {"op": "hello", "nvtx": False})
    link.launch()                                   # at the end of run 1, for run 2
    link.rehello({"op": "hello", "nvtx": True})     # run 2's hello
    link.ask({"op": "open"}, 10)
    assert worker.sent == [{"op": "hello", "nvtx": False}]
    assert worker.asked == [{"op": "hello", "nvtx": True}, {"op": "open"}]
    link.rehello({"op": "hello", "nvtx": True})     # the same again: nothing to send
    link.ask({"op": "open"}, 10)
    assert worker.asked[2:] == [{"op": "open"}]


def test_after_a_run_the_spare_process_takes_over_and_a_new_spare_starts():
    """Back to back, a run waited for the subject process started at the end of the last (torch, a
    CUDA context: seconds on each GPU). Now one more is kept: started a run ago, never used by a
    subject, it takes over at the end of a run, so no run's subjects share an earlier run's process."""
    from cudabench.engine.subject_link import SubjectLink

    made = []

    def start():
        made.append(StandInSubject(len(made) + 1))
        return made[-1]

    link = SubjectLink(start, {"op": "hello", "run": 1})
    assert link.ask({"op": "open"}, 10)["by"] == 1
    link.renew()                                    # the end of run 1: no spare yet, so 2 starts, and spare 3
    assert made[0].closed and [w.n for w in made] == [1, 2, 3] and not made[2].asked
    link.rehello({"op": "hello", "run": 2})
    assert link.ask({"op": "open"}, 10)["by"] == 2
    assert made[2].sent == [] and not made[2].asked  # a waiting spare is not greeted: no GPU work beside run 2
    link.renew()                                    # the end of run 2: spare 3 takes over, 4 is the new spare
    assert made[1].closed and len(made) == 4 and not made[2].closed
    assert made[2].sent == [{"op": "hello", "run": 2}]  # greeted as it takes over, with the hello of then,
    assert made[3].sent == [] and not made[3].asked
    link.rehello({"op": "hello", "run": 3})
    assert link.ask({"op": "open"}, 10)["by"] == 3
    assert made[2].asked[0] == {"op": "hello", "run": 3}  # and with its own run's before its first subject
    link.close()
    assert all(w.closed for w in made)


def test_a_worker_that_serves_several_runs_keeps_a_spare_from_its_first():
    """Without a spare before the first run's end, the second run (back to back, or a Dask cluster's
    next) waited for a fresh subject process: 4.7 s on each of four H100s."""
    from cudabench.engine.subject_link import SubjectLink
    from cudabench.engine.warm import load_handler
    from cudabench.engine.workers import worker_command

    made = []

    def start():
        made.append(StandInSubject(len(made) + 1))
        return made[-1]

    link = SubjectLink(start, {"op": "hello"})
    link.launch()
    link.keep_spare()                               # at the first hello of a worker that serves several runs
    link.keep_spare()                               # one spare, not two
    assert [w.n for w in made] == [1, 2]
    link.renew()                                    # the end of run 1: 2 takes over at once, 3 is the spare
    assert link.ask({"op": "open"}, 10)["by"] == 2 and len(made) == 3
    assert load_handler(None).spare and worker_command(keep_spare=True)[-1] == "--keep-spare"
    assert "--keep-spare" not in worker_command()   # a run's fresh worker serves one run: no spare


def test_the_judges_subject_link_starts_the_spare_only_where_it_serves_several_runs(monkeypatch):
    """Handler(spare=True) (the warm daemon, a Dask lane) starts a spare with its subject process at the
    first hello; a run's fresh worker starts none."""
    from cudabench.engine.protocol import Hello
    from cudabench.engine.subject_link import SubjectLink
    from cudabench.engine.worker import Handler

    made = []

    def standing_in(hello, on_status):
        return SubjectLink(lambda: made.append(StandInSubject(len(made) + 1)) or made[-1], hello)

    monkeypatch.setattr(SubjectLink, "process", staticmethod(standing_in))
    kept = Handler(device="cuda", spare=True)._subject_link(Hello(()))
    assert len(made) == 2 and kept.worker is made[0] and kept.spare[0] is made[1]
    fresh = Handler(device="cuda")._subject_link(Hello(()))
    assert len(made) == 3 and fresh.worker is made[2] and fresh.spare is None


def test_it_answers_the_listing_at_once_while_it_serves_a_run():
    invocation("ok")  # started
    thread = threading.Thread(target=invocation, args=("sleep-2",))
    thread.start()
    try:
        assert wait_until(lambda: any(info.get("busy") for _, info in warm_workers()), seconds=1.5)
    finally:
        thread.join(30)
    [(_, info)] = warm_workers()
    assert not info["busy"] and info["runs"] == 2


def test_a_later_runs_hello_gets_a_subject_process_no_earlier_run_used():
    """A judge kept between runs without the warm daemon's end-of-run renewal (a Dask worker's lane)
    renews its subject process at the next run's hello; one renewed at the end of the run is not
    renewed again (its spare would be wasted)."""
    from cudabench.engine.worker import Handler

    handler = Handler(device="cpu")
    hello = {"op": "hello", "kernels_dirs": []}
    served = {"op": "build", "family": "no-such-family", "arch": None}
    assert handler.handle(hello)["type"] == "ready"
    renewed = []
    handler.link.renew = lambda: renewed.append(True)
    assert handler.handle(hello)["type"] == "ready" and renewed == []  # nothing ran in it yet
    handler.handle(served)
    assert handler.handle(hello)["type"] == "ready" and renewed == [True]
    assert handler.handle(hello)["type"] == "ready" and renewed == [True]
    handler.handle(served)
    handler.renew_subject_process()  # a warm worker's end of run
    assert handler.handle(hello)["type"] == "ready" and renewed == [True, True]


def test_a_spare_that_died_while_it_waited_is_replaced_at_the_hand_over():
    """Killed (out of memory, or by a subject of the run before): the next run's first request got
    "the subject process could not start", and a first build failure is every lane's for the run."""
    import sys

    from cudabench.engine.subject_link import SubjectLink
    from cudabench.engine.workers import ProcessWorker

    fake = [sys.executable, str(Path(__file__).parent / "fake_worker.py")]
    started = []

    def start():
        started.append(ProcessWorker(fake))
        return started[-1]

    link = SubjectLink(start, {"op": "hello", "kernels_dirs": []})
    try:
        link.launch()
        link.keep_spare()
        spare = link.spare[0]
        os.kill(spare.proc.pid, signal.SIGKILL)
        spare.proc.wait(10)
        link.renew()
        assert link.worker is not spare and link.ask({"op": "build", "family": "add2"}, 30)["ok"]
        assert len(started) == 4  # the first, the dead spare, its replacement, and a new spare
    finally:
        link.close()


def test_a_spare_subject_process_does_no_gpu_work_until_its_hello(monkeypatch):
    """A spare waits beside another subject process's run on the same GPU: it imports, and makes its CUDA
    context, first CUDA backward and first CUPTI session only with its hello, which comes as it takes over
    (at the end of a run). Started with --spare; the subject process of now is not."""
    import torch

    from cudabench.engine import preload as preloading
    from cudabench.engine.subject_link import subject_command

    warmed = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(preloading, "warm_gpu", lambda profiler=False: warmed.append(profiler))
    preloading.preload(profiler=True, gpu=False)
    assert warmed == []
    preloading.preload(profiler=True)
    assert warmed == [True]
    assert subject_command(spare=True)[-1] == "--spare" and "--spare" not in subject_command()


def test_the_link_reads_a_subject_processs_threads_from_its_hello_on_and_forgets_them_with_it():
    """A subject process of its own gets a ledger at its hello's answer (its threads then are its own); a
    worker in the judge's process gets none (its own reading serves the tests); dropping the process drops it."""
    import subprocess

    from cudabench.engine.subject_link import SubjectLink
    from cudabench.engine.workers import InlineWorker

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        worker = StandInSubject()
        worker.proc = child
        link = SubjectLink(lambda: worker, {"op": "hello"})
        assert link.ask({"op": "open"}, 10)["by"] == 1
        assert link.threads is not None and link.threads.pid == child.pid and link.threads.unknown() == []
        link.drop()
        assert link.threads is None
    finally:
        child.kill()
        child.wait()
    inline = SubjectLink(lambda: InlineWorker(type("H", (), {"handle": lambda self, r: {"type": "ready"}})()),
                         {"op": "hello"})
    inline.ask({"op": "open"}, 10)
    assert inline.threads is None


LEAVES_A_THREAD = "import sys, _thread, time\nfor line in sys.stdin:\n    _thread.start_new_thread(time.sleep, (30,))\n    print('ok', flush=True)\n"


@pytest.mark.parametrize("healthy", [True, False])
def test_a_finish_reply_that_hides_a_thread_is_read_by_the_judge_before_the_process_goes(healthy):
    """A subject process whose reply to `finish` names no thread left (forged: healthy, or not healthy so that
    the link drops it at once) is read by the judge all the same: the threads go on the record and the process
    is dropped."""
    import subprocess
    from types import SimpleNamespace

    from cudabench.engine.subject_link import SubjectLink
    from cudabench.measure import integrity
    from cudabench.measure.integrity_pass import IntegrityPass

    class Forging(StandInSubject):
        def __init__(self):
            super().__init__()
            self.proc = subprocess.Popen([sys.executable, "-c", LEAVES_A_THREAD], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, text=True)

        def request(self, message, timeout, on_status=None):
            if message["op"] != "finish":
                return super().request(message, timeout, on_status)
            self.proc.stdin.write("go\n")
            self.proc.stdin.flush()
            self.proc.stdout.readline()
            return {"patched": [], "changed": [], "threads": [], "lasting": [], "healthy": healthy}

        def close(self):
            self.proc.kill()
            self.proc.wait()

    link = SubjectLink(Forging, {"op": "hello"})
    link.ask({"op": "open"}, 10)
    session = IntegrityPass()
    session.ask = lambda request: link.ask(request, 10)
    session.judge, session.base = SimpleNamespace(subject=link), SimpleNamespace(role="variant")
    left = session.finish()
    assert integrity.threads_left(left["threads"], trusted=False).failed, left
    assert not left["healthy"] and "read by the judge" in left["lasting"][-1] and link.worker is None


def test_an_open_goes_to_a_fresh_process_where_the_judge_reads_threads_earlier_code_left():
    """Threads the judge reads in the subject process that no finish accounted for (a skipped subject's, an
    extension's loading at a build): the open drops that process first, so the subject opens in a fresh one."""
    import subprocess
    from types import SimpleNamespace

    from cudabench.engine.subject_link import SubjectLink
    from cudabench.measure.judge import Session

    made = []

    class Leaving(StandInSubject):
        def __init__(self):
            super().__init__(len(made) + 1)
            self.proc = subprocess.Popen([sys.executable, "-c", LEAVES_A_THREAD], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, text=True)
            made.append(self)

        def leave_a_thread(self):
            self.proc.stdin.write("go\n")
            self.proc.stdin.flush()
            self.proc.stdout.readline()

        def close(self):
            super().close()
            self.proc.kill()
            self.proc.wait()

    link = SubjectLink(Leaving, {"op": "hello"})
    session = SimpleNamespace(judge=SimpleNamespace(subject=link, on_status=lambda text: None),
                              case=SimpleNamespace(key="case"))
    session.ask_while = lambda request, work: (link.ask(request, 10), work())
    assert Session._open(session, {"op": "open"}, lambda: None)["by"] == 1
    assert Session._open(session, {"op": "open"}, lambda: None)["by"] == 1  # nothing left: the same process
    made[0].leave_a_thread()
    assert Session._open(session, {"op": "open"}, lambda: None)["by"] == 2 and made[0].closed
    link.close()


def test_an_open_the_subject_process_answers_stale_is_made_once_more_in_a_fresh_one():
    """A subject process that answers an open "stale" (it cannot serve the subject for what came before it) is
    replaced and the open made again there, once: a second stale answer is the subject's error."""
    from types import SimpleNamespace

    from cudabench.engine.subject_link import SubjectLink
    from cudabench.measure.judge import Session
    from cudabench.measure.judged_calls import SubjectError

    stale = {"type": "error", "message": "threads left", "stale": True, "healthy": False}
    made = []

    class Stale(StandInSubject):
        def __init__(self):
            super().__init__(len(made) + 1)
            made.append(self)

        def request(self, message, timeout, on_status=None):
            if message["op"] == "open" and self.n in answers_stale:
                return stale
            return super().request(message, timeout, on_status)

    link = SubjectLink(Stale, {"op": "hello"})
    statuses = []
    session = SimpleNamespace(judge=SimpleNamespace(subject=link, on_status=statuses.append),
                              case=SimpleNamespace(key="case"))
    session.ask_while = lambda request, work: (Session._replied(link.ask(request, 10)), work())
    answers_stale = {1}
    assert Session._open(session, {"op": "open"}, lambda: None)["by"] == 2 and made[0].closed
    assert statuses == ["case: threads left"]
    answers_stale = {3, 4}
    link.drop()
    with pytest.raises(SubjectError, match="threads left"):
        Session._open(session, {"op": "open"}, lambda: None)
    assert len(made) == 4
