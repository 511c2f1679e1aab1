"""The judge's watch on the processes a subject starts (cudabench.measure.processes), on real processes of
this machine: found below the subject process and among the orphans a subreaper judge collects, zombies not
counted, a process that keeps forking ended whole, and a pid it let go never signalled."""

import json
import subprocess
import sys
import textwrap
import time

import pytest

from cudabench.measure import processes
from cudabench.measure.processes import ProcessWatch


def run_script(body: str) -> dict:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(body)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def test_a_process_a_subject_orphans_is_found_below_the_judges_process():
    """A helper that leaves its parent (a double fork) is reparented to the judge's process, a child
    subreaper, and found there; with the subject process's own children, and none of the judge's own."""
    found = run_script("""
        import json, subprocess, time
        from cudabench.measure.processes import ProcessWatch, become_subreaper
        assert become_subreaper()
        ours = subprocess.Popen(["sleep", "30"])  # the judge's own (a spare subject process)
        subject = subprocess.Popen(["bash", "-c", "sleep 0.5; (setsid sleep 31 &); sleep 32 & wait"])
        watch = ProcessWatch(lambda: (subject.pid, {ours.pid}))
        watch.before()
        time.sleep(1.0)
        watch.watch()
        seen = watch.stop()
        alive = [ours.poll() is None, subject.wait(timeout=10) >= 0]  # the subject ends with its child, unkilled
        ours.kill()
        print(json.dumps({"seen": sorted(seen.values()), "alive": alive}))
    """)
    assert sorted(d.split("(")[1] for d in found["seen"]) == ["sleep 31)", "sleep 32)"], found
    assert found["alive"] == [True, True]  # the judge's own and the subject process itself are not killed


@pytest.mark.parametrize("late", [False, True])
def test_a_process_that_keeps_forking_is_stopped_then_ended_whole(late):
    """Each round stops what was seen and looks again: nothing that forks on is left running. A chain can
    fork and exit faster than a look, round after round (on a loaded machine CI once saw one escape and
    hold the test's pipes): its process group is then killed whole. `late`: every signal sent to a pid
    comes too late and every look finds a new process, so only the group's signal ends the chain."""
    found = run_script("""
        import json, os, signal, subprocess, time
        from cudabench.measure.processes import ProcessWatch, become_subreaper, descendants, running
        assert become_subreaper()
        subject = subprocess.Popen(["bash", "-c", "sleep 30"])
        watch = ProcessWatch(lambda: (subject.pid, set()))
        if LATE:
            look, fresh = watch.look, iter(range(10**9, 2 * 10**9))
            watch._signal = lambda pid, sig: None
            watch.look = lambda: (look(), watch.seen.setdefault(next(fresh), "a pid that was never there"))
        watch.before()
        hopper = "import os, time\\nwhile True:\\n    if os.fork():\\n        os._exit(0)\\n    time.sleep(0.002)"
        chain = subprocess.Popen(["python3", "-c", hopper], start_new_session=True,  # the judge's orphan at once
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        watch.watch()  # as while a subject is timed, a look every POLL seconds: one look alone missed the chain
        time.sleep(0.5)  # once in 16 here (each member lives 2 ms, and the look reads hundreds of zombies first)
        seen = watch.stop()
        time.sleep(0.3)
        left = [p for p in descendants([os.getpid()]) if running(p) and p != subject.pid]
        subject.kill()
        try:
            os.killpg(chain.pid, signal.SIGKILL)  # whatever the watch left
        except ProcessLookupError:
            pass
        print(json.dumps({"seen": len(seen), "left": left}))
    """.replace("LATE", str(late)))
    assert found["seen"] >= 1 and found["left"] == [], found


def test_a_group_that_holds_a_process_from_before_is_not_signalled_whole():
    """A helper that joins the process group of a process that ran before the subject: that one is spared,
    the helper ended by its pid."""
    found = run_script("""
        import json, os, subprocess, time
        from cudabench.measure.processes import ProcessWatch, become_subreaper, running
        assert become_subreaper()
        subject = subprocess.Popen(["bash", "-c", "sleep 30"])
        before = subprocess.Popen(["sleep", "33"], preexec_fn=os.setpgrp)  # its own group, in this session
        watch = ProcessWatch(lambda: (subject.pid, set()))
        watch.before()
        helper = subprocess.Popen(["sleep", "34"], preexec_fn=lambda: os.setpgid(0, before.pid))
        time.sleep(0.2)
        seen = watch.stop()
        time.sleep(0.2)
        alive = [running(before.pid), running(helper.pid) and helper.poll() is None]
        for p in (subject, before):
            p.kill()
        print(json.dumps({"seen": sorted(seen), "alive": alive, "helper": helper.pid}))
    """)
    assert found["seen"] == [found["helper"]] and found["alive"] == [True, False], found


def test_zombies_are_not_running_and_do_not_count():
    """A binding that starts a tool and never waits for it leaves a zombie: nothing runs there."""
    watch = ProcessWatch(lambda: (None, set()))  # this process's own children count, as under a subreaper
    watch.before()
    done = subprocess.Popen(["true"])
    time.sleep(0.3)  # exited, not collected: a zombie
    assert done.pid in processes.children(__import__("os").getpid()) and not processes.running(done.pid)
    watch.look()
    assert done.pid not in watch.seen
    done.wait()


def test_a_process_started_after_the_last_watch_ended_is_ended_before_the_next_subject():
    sleeper_before = subprocess.Popen(["sleep", "30"])
    first = ProcessWatch(lambda: (None, set()))
    first.before()
    after = first.tree()  # the tree when the last subject's watch ended
    planted = subprocess.Popen(["sleep", "31"])
    left = ProcessWatch(lambda: (None, set())).before(after)
    assert list(left) == [planted.pid] and planted.poll() is not None   # killed (and collected here)
    assert sleeper_before.poll() is None  # what ran before is not touched
    sleeper_before.kill()
    sleeper_before.wait()


def test_the_verdict_fails_when_the_watch_could_not_look():
    from cudabench.measure.integrity import processes_left

    assert processes_left({}, error="OSError: boom").verdict == "fail"
    assert processes_left({}).verdict == "pass"
    assert processes_left({7: "pid 7 (x)"}, trusted=True).verdict == "pass"
    assert processes_left({7: "pid 7 (x)"}).verdict == "fail"


def test_a_watch_whose_last_look_fails_fails_the_verdict():
    """The error of the last look, made when the watch stops, reaches the verdict."""
    from types import SimpleNamespace

    from cudabench.measure.integrity_pass import IntegrityPass

    calls = []

    def ids():
        calls.append(1)
        if len(calls) > 1:  # before() looks once; the look in stop() fails
            raise OSError("proc went away")
        return None, set()

    session = IntegrityPass()
    session.base = SimpleNamespace(role="variant")
    session.judge = SimpleNamespace(processes_after=None, subject=SimpleNamespace())
    session.ended_before = {}
    session.watch = ProcessWatch(ids)
    session.watch.before()
    check = session.processes()
    assert check.verdict == "fail" and "proc went away" in check.detail
