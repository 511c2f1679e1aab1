"""Runs on a Dask distributed cluster, on the CPU: a LocalCluster of worker processes that declare
GPU=1, each running stand-in cudabench workers (tests/fake_worker.py) for fake subjects."""

import sys
from pathlib import Path

import pytest

distributed = pytest.importorskip("distributed")
import dask  # noqa: E402

from cudabench.engine.cluster import ClusterError, ClusterRunner  # noqa: E402
from cudabench.engine.plan import RunOptions, Task  # noqa: E402
from cudabench.measure.stop import FixedCount  # noqa: E402
from cudabench.results.records.model import Case  # noqa: E402
from cudabench.spec.family import Variant  # noqa: E402

FAKE = [sys.executable, str(Path(__file__).parent / "fake_worker.py")]


def local_cluster(workers=2, processes=True, gpu=True):
    return distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=processes,
                                    resources={"GPU": 1} if gpu else None, dashboard_address=":0", silence_logs=50)


@pytest.fixture(scope="module")
def cluster():
    with local_cluster() as c:
        yield c


def task(registry, *names):
    family = registry.family("add2")
    variants = tuple(Variant(n, "fake", bind=lambda e: None) for n in names)
    return Task(family, (Case("add2", (("n", 64),)),), variants, ())


def run(address, registry, names, **options):
    seen = []
    with ClusterRunner(address, RunOptions(rule=FixedCount(3), timeout=30.0, **options), command=FAKE,
                       on_result=seen.append) as runner:
        runner.start()
        results = runner.run([task(registry, *names)])
    return results, seen, runner


def test_subjects_run_on_the_clusters_gpu_workers_in_plan_order(cluster, registry):
    names = [f"sleep-0.{i}" for i in range(1, 7)]
    results, seen, runner = run(cluster.scheduler_address, registry, names)
    assert [r.subject for r in results] == names and [r.status for r in results] == ["ok"] * 6
    assert len(seen) == 6
    assert len({r.gpu_uuid for r in results}) == 2  # both Dask workers ran subjects
    assert runner.environment["gpu"] == "fake GPU" and runner.gpu_count == 2


def test_a_long_subject_holds_no_other_behind_it_while_a_gpu_is_free(cluster, registry):
    """Each subject goes to Dask when a GPU is free: one sent at once to a busy worker (distributed gives
    a task with a resource to a worker as it arrives) would wait behind the long one, and so the run."""
    names = ["sleep-1.5"] + [f"sleep-0.0{i}" for i in range(1, 9)]
    results, _, _ = run(cluster.scheduler_address, registry, names)
    assert [r.status for r in results] == ["ok"] * 9
    by_gpu = {}
    for r in results:
        by_gpu.setdefault(r.gpu_uuid, []).append(r.subject)
    assert sorted(by_gpu.values(), key=len) == [["sleep-1.5"], names[1:]], by_gpu


def test_a_variants_random_shapes_verdict_goes_with_its_later_tasks(cluster, registry):
    """As with --gpus: a request made after the variant's first verdict carries it to the other judges."""
    family = registry.family("add2")
    tasks = [Task(family, (Case("add2", (("n", 64 * (i + 1)),)),), (Variant("shapes-fail", "fake", bind=lambda e: None),), ())
             for i in range(4)]
    with ClusterRunner(cluster.scheduler_address, RunOptions(rule=FixedCount(3), timeout=30.0), command=FAKE) as runner:
        runner.start()
        results = runner.run(tasks)
    details = [c.detail for r in results for c in r.integrity]
    assert details.count("wrong at n=3") <= 2 and "given ['fail', 'wrong at n=3']" in details, details


def test_a_task_cancelled_mid_run_is_recorded_and_the_run_goes_on(cluster, registry, monkeypatch):
    """A scheduler restart or a lost connection cancels tasks: `distributed.wait` raises for them. Each is
    recorded as lost, and every other subject still runs."""
    feed = ClusterRunner._feed

    def feed_then_cancel(self, waiting, futures, live):
        feed(self, waiting, futures, live)
        self.client.cancel([f for f, (_, s) in futures.items() if s.name == "sleep-0.5"])

    monkeypatch.setattr(ClusterRunner, "_feed", feed_then_cancel)
    results, _, _ = run(cluster.scheduler_address, registry, ["sleep-0.5", "a", "b", "c"])
    status = {r.subject: (r.status, r.error) for r in results}
    assert list(status) == ["sleep-0.5", "a", "b", "c"]
    assert status["sleep-0.5"][0] == "ERROR" and "Cancelled" in status["sleep-0.5"][1]
    assert all(status[n][0] == "ok" for n in "abc")


def test_a_dask_worker_whose_cudabench_worker_cannot_start_gets_no_subject(registry):
    """It would fail each subject at once and so be the free GPU nearly every time: the run leaves it out
    and says so."""
    import os

    with local_cluster() as c, distributed.Client(c.scheduler_address) as client:
        broken = sorted(client.scheduler_info()["workers"])[0]
        client.run(os.environ.__setitem__, "FAKE_FAIL_START", "1", workers=[broken])
        results, _, runner = run(c.scheduler_address, registry, [f"sleep-0.0{i}" for i in range(1, 9)])
    assert [r.status for r in results] == ["ok"] * 8 and len({r.gpu_uuid for r in results}) == 1
    assert runner.unstarted == {broken} and "could not start" in runner.notes()[0]


def test_a_crash_in_the_isolated_worker_costs_that_subject_only(cluster, registry):
    results, _, _ = run(cluster.scheduler_address, registry, ["a", "segv", "b", "exit"])
    assert {r.subject: r.status for r in results} == {"a": "ok", "segv": "ERROR", "b": "ok", "exit": "ERROR"}
    assert "SIGSEGV" in results[1].error and results[1].host == "fake"


def test_a_dask_worker_lost_mid_run_has_its_subject_run_again_elsewhere(registry, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_MARKER", str(tmp_path / "killed"))
    with local_cluster() as c:
        results, _, runner = run(c.scheduler_address, registry, ["a", "kill-parent-once", "b", "c"])
    assert (tmp_path / "killed").exists()  # a Dask worker did die mid-task
    assert [(r.subject, r.status) for r in results] == [("a", "ok"), ("kill-parent-once", "ok"), ("b", "ok"),
                                                        ("c", "ok")]
    assert runner.departed and "left during the run" in runner.notes()[0]  # and the run says so


def test_a_subject_that_kills_every_worker_is_recorded_as_lost(registry):
    with dask.config.set({"distributed.scheduler.allowed-failures": 1}):
        with local_cluster() as c:
            results, _, _ = run(c.scheduler_address, registry, ["a", "kill-parent", "b"])
    status = {r.subject: (r.status, r.error) for r in results}
    assert list(status) == ["a", "kill-parent", "b"]  # every subject recorded, none dropped
    assert status["kill-parent"][0] == "ERROR" and "died" in status["kill-parent"][1]
    # a subject queued on a worker that died is lost with it (Dask counts it against that task too)
    assert all(s == "ok" or "died" in e for s, e in status.values())


def test_no_scheduler_or_no_gpu_workers_is_a_clear_error(registry, monkeypatch):
    monkeypatch.setattr("cudabench.engine.cluster.CONNECT_TIMEOUT", "2s")
    with pytest.raises(ClusterError, match="Cannot reach the Dask scheduler at tcp://127.0.0.1:1"):
        ClusterRunner("tcp://127.0.0.1:1", RunOptions()).start()
    with local_cluster(workers=1, processes=False, gpu=False) as c:
        with pytest.raises(ClusterError, match="no worker with a GPU resource"):
            ClusterRunner(c.scheduler_address, RunOptions()).start()


def test_an_address_dask_cannot_read_is_one_paragraph_at_once_with_no_noise():
    import subprocess
    import sys
    import time

    start = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "cudabench", "run", "-k", "add2", "--cluster", "not a url"],
                         capture_output=True, text=True, timeout=60)
    assert time.monotonic() - start < 10  # was a minute: the failed Client closing itself when collected
    assert res.returncode == 2 and "Cannot reach the Dask scheduler at not a url" in res.stderr
    assert "Exception ignored" not in res.stderr and "Traceback" not in res.stderr


# ---- through the command line ----------------------------------------------------------------------

def cli(*args):
    from typer.testing import CliRunner

    from cudabench.cli.app import app

    return CliRunner().invoke(app, list(args))


def test_run_on_a_cluster_of_machines_without_gpus_says_so(cluster):
    res = cli("run", "-k", "add2", "--cluster", cluster.scheduler_address)
    assert res.exit_code == 2, res.output
    assert "No CUDA device" in res.output and "Traceback" not in res.output


def test_without_distributed_the_message_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    res = cli("run", "-k", "add2", "--cluster", "tcp://127.0.0.1:1")
    assert res.exit_code == 2 and 'pip install "cudabench[cluster]"' in res.output


def test_gpus_and_cluster_are_alternatives():
    res = cli("run", "-k", "add2", "--gpus", "all", "--cluster", "tcp://127.0.0.1:1")
    assert res.exit_code == 2 and "--gpus and --cluster are alternatives" in res.output


def test_on_a_cluster_of_two_gpu_models_each_case_stays_on_one_model(registry):
    import os

    family = registry.family("add2")
    cases = [Task(family, (Case("add2", (("n", 64 * (i + 1)),)),),
                  tuple(Variant(f"sleep-0.0{i}{j}", "fake", bind=lambda e: None) for j in range(3)), ())
             for i in range(4)]
    with local_cluster() as c, distributed.Client(c.scheduler_address) as client:
        workers = sorted(client.scheduler_info()["workers"])
        for addr, model in zip(workers, ("NVIDIA H100", "NVIDIA A100")):  # what their fake workers will report
            client.run(os.environ.__setitem__, "FAKE_GPU_NAME", model, workers=[addr])
        with ClusterRunner(c.scheduler_address, RunOptions(rule=FixedCount(3), timeout=30.0), command=FAKE) as runner:
            runner.start()
            results = runner.run(cases)
    assert sorted(runner.models.values()) == ["NVIDIA A100", "NVIDIA H100"]
    assert len(results) == 12 and all(r.status == "ok" for r in results)
    by_case = {}
    for r in results:
        by_case.setdefault(r.case.key, set()).add(r.gpu)
    assert all(len(models) == 1 for models in by_case.values()), by_case
    assert {m for models in by_case.values() for m in models} == {"NVIDIA A100", "NVIDIA H100"}  # both used


def test_a_dask_workers_kept_lane_is_greeted_again_by_a_later_run(monkeypatch):
    """The lane (and its judge) outlives a run on a Dask worker; a later run greets it again, so the
    judge gives that run a subject process no earlier run's subject ran in."""
    from cudabench.engine import cluster_tasks as cluster
    from cudabench.engine.lane import Lane

    greeted = []
    monkeypatch.setattr(Lane, "next_run", lambda self: greeted.append(self))
    monkeypatch.setattr(cluster, "_LANES", {})
    monkeypatch.setattr(cluster, "_RUN_OF", {})
    hello = {"op": "hello", "kernels_dirs": []}
    first = cluster._lane(hello, FAKE, "run-1")
    assert cluster._lane(hello, FAKE, "run-1") is first and greeted == []
    assert cluster._lane(hello, FAKE, "run-2") is first and greeted == [first]


def test_a_lane_greeted_for_a_later_run_loads_its_families_again():
    from cudabench.engine.lane import Lane
    from cudabench.engine.workers import ProcessWorker

    lane = Lane(lambda: ProcessWorker(FAKE), {"op": "hello", "kernels_dirs": []})
    try:
        worker = lane.ready()
        assert lane.build("add2", None) == "" and lane._loaded == {"add2"}
        lane.next_run()
        assert lane.worker is worker and lane._loaded == set()
    finally:
        lane.close()
