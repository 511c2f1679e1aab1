"""The subject process's own costs and upkeep: its heap, the pipe it reads requests from, the length of its CUPTI pass."""

import subprocess
import sys

SCRIPT = """
import gc
from cudabench.engine.subject_worker import SubjectHandler
handler = SubjectHandler("cpu", freeze_startup=True)
reply = handler.handle({"op": "hello", "kernels_dirs": []})
assert reply["type"] == "ready", reply
frozen, young = gc.get_freeze_count(), len(gc.get_objects())
print(frozen, young)
"""


def test_a_subject_process_sets_its_startup_heap_aside_so_each_open_collects_only_what_came_later():
    """Each subject's open collects garbage. After the hello, what the process holds (torch, the
    registry, the runner) is set aside, so that collection walks only what subjects made since."""
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    frozen, young = (int(v) for v in out.stdout.split())
    assert frozen > 10_000          # torch's heap and the harness's
    assert young < frozen / 20      # what a collection still walks


def test_the_in_process_cpu_handler_leaves_its_callers_heap_alone():
    from cudabench.engine.subject_worker import SubjectHandler

    assert SubjectHandler("cpu").freeze_startup is False
    assert SubjectHandler("cuda").freeze_startup is True


def test_requests_are_read_whole_from_a_pipe_whether_they_come_at_once_in_pieces_or_late():
    """The subject process polls for the judge's next request (awake between judged calls, as in the
    hot loop), then sleeps in select: every line arrives whole and in order, and the end of the pipe
    ends the requests."""
    import os
    import threading
    import time

    from cudabench.engine.subject_worker import SpinningLines

    read_end, write_end = os.pipe()
    lines = SpinningLines(read_end, spin=0.01)

    def judge():
        os.write(write_end, b'{"op": "a"}\n{"op": "b"}\n{"op"')
        time.sleep(0.05)  # past the polling: the reader is asleep in select
        os.write(write_end, b': "c"}\n')
        time.sleep(0.002)
        os.write(write_end, b'{"op": "d"}')  # a last line without its newline, then the end
        os.close(write_end)

    got = []
    writer, reader = threading.Thread(target=judge), threading.Thread(target=lambda: got.extend(lines), daemon=True)
    writer.start()
    reader.start()
    reader.join(10)  # a reader that misses the end would hang the suite: fail instead
    writer.join(10)
    assert not reader.is_alive(), "the reader did not see the end of the pipe"
    assert got == ['{"op": "a"}\n', '{"op": "b"}\n', '{"op": "c"}\n', '{"op": "d"}']
    os.close(read_end)


def test_the_cupti_pass_is_about_twenty_milliseconds_of_calls_three_to_ten():
    """The pass reads per-call medians (kernels, busy time, kernel time): a 9 ms call needs 3 of
    them, not 20 (its pass was 0.2 s a case in the sweep); a short call gets 10."""
    from cudabench.measure.cupti_pass import cupti_pass_calls

    assert [cupti_pass_calls(m, short=False)[0] for m in (20e-6, 1e-3, 4.4e-3, 9e-3, 1.0)] == [10, 10, 4, 3, 3]
    assert cupti_pass_calls(20e-6, short=True)[0] == 30
    assert cupti_pass_calls(20e-6, short=False)[1].calls == 3
    assert cupti_pass_calls(9e-3, short=False)[1].calls == 1


def test_the_subject_process_runs_its_code_under_the_module_name_the_state_guard_compares():
    """Started with -m, a module's code runs as __main__, outside the cudabench.* modules whose classes
    the state guard compares: a subject could patch the request handler or the pipe reader unseen.
    The process imports itself by name and runs that (-X importtime lists what was imported)."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "cudabench.engine.subject_worker"],
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines() if "|" in line}
    assert "cudabench.engine.subject_worker" in imported


def test_a_handle_replaced_during_a_request_answers_no_later_request():
    """serve() takes the functions it calls once: a subject that replaces the handler's `handle` (on
    the object or its class) cannot get between the judge's next request and its reply, nor take
    itself out of the state guard's report in it."""
    import io

    from cudabench.engine.channel import serve

    class Handler:
        def handle(self, request):
            forged = lambda *args: {"type": "forged"}  # noqa: E731
            self.handle = forged
            type(self).handle = forged
            return {"type": "real", "n": request["n"]}

    class Pipe:
        sent = []

        def send(self, message):
            self.sent.append(message)

    serve(Pipe(), Handler(), io.StringIO('{"n": 1}\n\n{"n": 2}\n{"op": "exit"}\n{"n": 3}\n'))
    assert Pipe.sent == [{"type": "real", "n": 1}, {"type": "real", "n": 2}]

