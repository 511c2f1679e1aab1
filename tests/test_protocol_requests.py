"""The run's requests to workers are records with one codec, built in one place (engine/protocol.py)
for the scheduler and the cluster alike, and read back by the worker as it reads them."""

from pathlib import Path

from cudabench.engine.plan import RunOptions, plan, subjects
from cudabench.engine.protocol import hello, subject_request
from cudabench.measure.settings import Settings
from cudabench.measure.stop import FixedCount
from cudabench.results.exporters.json_document import case_from_dict
from cudabench.spec.registry import discover

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "my_kernels"


def test_the_subject_request_reads_back_as_the_worker_reads_it():
    options = RunOptions(rule=FixedCount(7), seed=3, fuzz=0)
    [task] = plan(discover([EXAMPLES]), ["scale"], {"n": 1024}, options)
    subject = subjects(task, task.cases[0])[0]
    request = subject_request(subject, options, 11)
    assert request["op"] == "subject" and request["subject"] == subject.name and request["role"] == subject.role
    assert case_from_dict(request["case"]) == subject.case  # as worker.Handler reads it
    assert Settings(**request["settings"]) == options.settings(11)


def test_the_hello_carries_the_runs_choices():
    options = RunOptions(nvtx=True, time=False)
    message = hello([EXAMPLES], options, {"timing": "events"})
    assert message == {"op": "hello", "kernels_dirs": [str(EXAMPLES)], "ceilings": False, "nvtx": True,
                       "nvtx_iterations": False, "settings": {"timing": "events"}}
