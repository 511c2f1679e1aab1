"""Calls of one graph replay that skip, share or copy their work, on the CPU. Graph timing replays a graph
of n calls and divides by n. When all n calls read the same inputs, a binding that counts its calls while
the graph is captured can launch kernels that work on the last call of each replay only, or return the
first call's output from every call: right outputs wherever the judge reads, a figure n times too fast.
Now each call of the graph reads inputs of its own and writes outputs of its own (cudabench.measure.lanes):
the judge writes values of its own drawing into every lane before a judged replay and reads one lane it
picks at random, after the replay. A CUDA graph is modelled by GraphTimer itself, with its capture and
replay done on the CPU: what the stand-in extension launches while "capturing" is kept and run on each
replay."""

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from cudabench.measure import lanes as lanes_module
from cudabench.measure.settings import Settings
from cudabench.measure.timers import GraphTimer
from cudabench.results.records.model import Case
from cudabench.spec.registry import discover
from cudabench.measure.serial_calls import SerialCalls
from cudabench.results.records.model import IntegrityCheck
from runs import inline_judge
from test_judge import WorkTimer  # the CUPTI round's stand-in: calls alone, 1 µs plus 1 ns per element

HOSTILE = Path(__file__).resolve().parent / "hostile_kernels"
NOT_RUN = IntegrityCheck("serial-calls", "not run", "switched off by the test")
N = 1 << 14
GRAPH_COUNTER = 6  # hostile.h's HOSTILE_GRAPH_COUNTER


class Launches:
    """The hostile extension on the CPU: eager calls compute at once; while `capturing`, each call records
    its launch, as a graph records kernels, and the counter mode counts launches as the device counter does.
    `batch` computes every call's y in one launch, its work counted once: the room a small call leaves on
    a GPU, which one kernel over every call fills."""

    def __init__(self):
        self.work, self.capturing, self.graph, self.launches, self.graph_calls = 0, False, [], 0, 0
        self.lazy_alone = False   # eager calls after a capture skip their work (cheap, and wrong)

    def set_graph_calls(self, calls):
        self.graph_calls = calls

    def hostile(self, x, y, mode):
        def compute():
            y.copy_(2 * x + 1)
            self.work += x.numel()

        def counted():
            every = self.graph_calls
            if every <= 1 or self.launches % every == every - 1:
                compute()
            self.launches += 1

        if not self.capturing:
            if not (self.lazy_alone and self.graph):
                compute()
        else:
            self.graph.append(counted if mode == GRAPH_COUNTER else compute)

    def batch(self, xs, ys):
        def batched():
            for a, b in zip(xs, ys):
                b.copy_(2 * a + 1)
            self.work += xs[0].numel()

        assert self.capturing
        self.graph.append(batched)


class CpuGraph(GraphTimer):
    """GraphTimer with its capture and replay on the CPU: a capture keeps the launches the calls make (their
    Python runs once), a replay runs them; a replay takes 1 µs plus 1 ns per element computed."""

    def __init__(self, ext):
        super().__init__()
        self.ext = ext

    def prepare(self, call, estimate):
        # the modelled call's time, not the host's: a loaded machine's wall clock would hold fewer calls
        super().prepare(call, 1e-6 + 1e-9 * N)

    def _warm(self, calls):
        for c in calls:
            c()

    def _capture(self, calls):
        self.ext.capturing, self.ext.graph = True, []
        try:
            made = [c() for c in calls]
        finally:
            self.ext.capturing = False
        self.graph = SimpleNamespace(replay=self._replay)
        return made if self.lanes is not None else made[-1:]

    def _replay(self):
        for launch in self.ext.graph:
            launch()

    def _timed_replay(self):
        work = self.ext.work
        self._replay()
        return 1e-6 * self.per_graph + 1e-9 * (self.ext.work - work)


@pytest.fixture(scope="module")
def registry():
    return discover([HOSTILE])


def judge_graph(registry, name, monkeypatch, ext=None):
    ext = ext or Launches()
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: ext.capturing)
    judge = inline_judge(registry, HOSTILE, {"hostile": ext},
                         lambda timing: CpuGraph(ext) if timing == "graph" else WorkTimer(ext))
    settings = Settings(rule={"kind": "repeat", "count": 20}, warmup_calls=2, warmup_seconds=0.0, fuzz=0,
                        timing="graph")
    return judge.run(registry.family("hostile"), Case("hostile", (("n", N),)), name, "variant", settings)


def ok_and_far_too_fast(registry, monkeypatch, name):
    """With the checks that catch it switched off: `name` is ok at under a quarter of the honest figure."""
    honest = judge_graph(registry, "hostile-honest", monkeypatch)
    r = judge_graph(registry, name, monkeypatch)
    assert r.status == "ok", (r.error, failed(r))
    assert r.stats.median < honest.stats.median / 4


def failed(result):
    return {c.name: c.detail for c in result.integrity if c.failed}


def test_an_honest_kernel_under_graph_timing_is_ok_with_many_calls_a_graph(registry, monkeypatch):
    r = judge_graph(registry, "hostile-honest", monkeypatch)
    assert r.status == "ok", (r.error, failed(r))
    assert r.measurement.calls_per_sample > 8
    assert [c.verdict for c in r.integrity if c.name == "serial-calls"] == ["pass"]


def test_a_graph_whose_calls_overlap_is_invalid_by_the_time_of_a_call_alone(registry, monkeypatch):
    """Every call's outputs right, the figure a throughput: the last call of a replay computes them all in
    one launch. Without the serial-calls check it is ok at a fraction of the honest figure."""
    r = judge_graph(registry, "hostile-graph-batch", monkeypatch)
    assert r.status == "INVALID" and set(failed(r)) == {"serial-calls"}, (r.error, r.integrity)
    assert "overlap" in failed(r)["serial-calls"] and "second round" in failed(r)["serial-calls"]

    monkeypatch.setattr(SerialCalls, "serial_calls", lambda self, result: NOT_RUN)
    ok_and_far_too_fast(registry, monkeypatch, "hostile-graph-batch")


def test_calls_alone_that_skip_their_work_to_lower_the_floor_are_wrong(registry, monkeypatch):
    ext = Launches()
    ext.lazy_alone = True
    r = judge_graph(registry, "hostile-graph-batch", monkeypatch, ext)
    assert r.status == "INVALID" and "wrong" in failed(r)["serial-calls"], (r.error, r.integrity)


@pytest.mark.parametrize("name, check", [("hostile-graph-counter", "fresh-output"),
                                         ("hostile-graph-shared", "output")])
def test_a_graph_whose_calls_skip_or_share_their_work_is_invalid(registry, monkeypatch, name, check):
    r = judge_graph(registry, name, monkeypatch)
    assert r.status == "INVALID" and check in failed(r), (r.error, r.integrity)


def test_read_from_the_last_call_alone_the_counter_passes_many_times_too_fast(registry, monkeypatch):
    """The tests above can fail: with the last lane always the one read and no other lane checked, the
    counter is ok and far too fast."""
    from cudabench.measure.integrity_pass import IntegrityPass

    monkeypatch.setattr(lanes_module.secrets, "randbelow", lambda n: n - 1)
    monkeypatch.setattr(IntegrityPass, "_every_lane", lambda self, taken, check: check)
    monkeypatch.setattr(SerialCalls, "serial_calls", lambda self, result: NOT_RUN)
    ok_and_far_too_fast(registry, monkeypatch, "hostile-graph-counter")


def test_every_lane_of_a_checked_replay_is_checked_whichever_lane_is_read(registry, monkeypatch):
    monkeypatch.setattr(lanes_module.secrets, "randbelow", lambda n: n - 1)
    r = judge_graph(registry, "hostile-graph-counter", monkeypatch)
    assert r.status == "INVALID" and "fresh-output" in failed(r), (r.error, r.integrity)


def test_each_call_of_the_graph_reads_inputs_and_writes_outputs_of_its_own(registry, monkeypatch):
    seen = []
    real = lanes_module.Lanes.pick

    def pick(self, draw, same, fresh):
        lane = real(self, draw, same, fresh)
        seen.append((self.count, lane, same))
        return lane

    monkeypatch.setattr(lanes_module.Lanes, "pick", pick)
    r = judge_graph(registry, "hostile-honest", monkeypatch)
    assert r.status == "ok"
    count = r.measurement.calls_per_sample
    assert {c for c, _, _ in seen} == {count}
    assert len({lane for _, lane, _ in seen}) > 1  # the lane read changes from call to call
    assert any(same for _, _, same in seen) and not all(same for _, _, same in seen)


def test_lanes_that_share_memory_or_differ_in_shape_are_refused():
    memory = torch.zeros(16)
    x = memory[:8]
    first = [lanes_module.Draw(0, {"x": x}, None)]
    ok = lanes_module.Lanes(({"x": x}, None), [], first)
    ok.mapped.append(({"x": memory[8:]}, None))
    assert ok.unlike() == ""
    shared = lanes_module.Lanes(({"x": x}, None), [], first)
    shared.mapped.append(({"x": memory[4:12]}, None))
    assert "share memory" in shared.unlike()
    other = lanes_module.Lanes(({"x": x}, None), [], first)
    other.mapped.append(({"x": torch.zeros(4)}, None))
    assert "not shaped like" in other.unlike()


def test_memory_shared_within_a_lane_is_allowed_and_across_lanes_is_not():
    """Autograd hands back the upstream gradient itself as the gradient of a sum: one call's output and
    input may alias. Another call's may not, wherever it lies among the spans."""
    m = torch.zeros(64)
    assert lanes_module.overlap([[m[0:16], m[8:24]], [m[24:32]]]) == ""
    assert lanes_module.overlap([[m[0:16]], [m[16:32]], [m[32:48], m[33:34]]]) == ""
    assert lanes_module.overlap([[m[0:40]], [m[1:2]], [m[50:60]]])  # inside another lane's span
    assert lanes_module.overlap([[m[0:10], m[5:30]], [m[40:50]], [m[20:21]]])  # under the furthest reach
    assert lanes_module.overlap([[m[0:30]], [m[0:10], m[2:3]], [m[40:41]]])


def test_a_subject_process_that_drops_its_lanes_broke_the_protocol(registry, monkeypatch):
    """A binding that finds the open subject through gc while the graph is captured and empties its lanes:
    the judge would read lane 0 alone, whose call computes while the others skip. The graph's call count
    and the lanes shared must agree."""
    from cudabench.measure.opened import Opened

    real = Opened.lane_calls

    def dropped(self, count, device):
        calls = real(self, count, device)
        self.lanes.clear()
        return calls

    monkeypatch.setattr(Opened, "lane_calls", dropped)
    r = judge_graph(registry, "hostile-honest", monkeypatch)
    assert r.status == "ERROR" and "broke the protocol" in r.error, (r.status, r.error)


def test_lanes_that_do_not_hold_the_values_of_their_seeds_broke_the_protocol(registry, monkeypatch):
    from cudabench.measure.opened import Opened

    real = Opened.lane_calls

    def easy(self, count, device):
        calls = real(self, count, device)
        for inputs, _ in self.lanes:
            inputs["x"].zero_()  # values the subject chose for its hot loop
        return calls

    monkeypatch.setattr(Opened, "lane_calls", easy)
    r = judge_graph(registry, "hostile-honest", monkeypatch)
    assert r.status == "ERROR" and "values of its seed" in r.error, (r.status, r.error)


def test_a_graph_holds_no_more_lanes_than_fit_a_quarter_of_the_l2():
    inputs = {"x": torch.zeros(1 << 20), "eps": 0.5}  # 4 MiB
    one_call = lanes_module.footprint(inputs, None, [([1 << 20], "float32")])
    assert one_call == 8 << 20
    assert lanes_module.room(one_call, 64 << 20) == 2  # a quarter of the L2
    assert lanes_module.room(one_call, 16 << 20) == 1


def test_the_figure_per_call_may_not_beat_a_call_alone_beyond_noise():
    from cudabench.measure import integrity

    # honest on the H100 (docs/benchmarks/h100-timing-truth.md), the closest first
    for figure, alone in [(10.3, 11.0), (1.37, 1.38), (18.5, 19.1), (1.44, 1.22), (146.2, 133.4)]:
        assert integrity.serial_calls(figure * 1e-6, [alone * 1e-6] * 3, 8).verdict == "pass"
    assert integrity.serial_calls(8.0e-6, [11.0e-6] * 3, 8).verdict == "fail"  # 73 % of a call alone
    verdict = integrity.serial_calls(0.3e-6, [1.2e-6, 1.3e-6, 9e-6], 61)
    assert verdict.verdict == "fail" and "1.30 µs" in verdict.detail and "61" in verdict.detail
    assert integrity.serial_calls(1e-6, [], 8).verdict == "not run"


def test_the_timed_window_holds_a_figure_to_the_busy_time_the_timer_saw():
    from cudabench.measure import integrity

    assert integrity.timed_window(9e-6, [10e-6] * 3, "events").verdict == "pass"
    assert integrity.timed_window(6.1e-6, [10e-6] * 3, "events").verdict == "pass"   # 80 % minus 2 µs: 6 µs
    verdict = integrity.timed_window(5.0e-6, [10e-6] * 3, "events")
    assert verdict.verdict == "fail" and "events timer's window" in verdict.detail and "10.0 µs" in verdict.detail
    assert integrity.timed_window(1e-6, [], "events").verdict == "not run"


@pytest.mark.parametrize("busy", [None, [], [1e-6, 1e-6], [1e-6, None, 1e-6], [1e-6] * 4])
def test_calls_alone_without_cuptis_busy_time_for_each_broke_the_protocol_on_a_gpu(busy):
    """On a GPU the floor is CUPTI's busy time of each call alone: never the per-call samples a subject
    process can reach (it could end the round itself and have its calls replayed and timed instead)."""
    from cudabench.measure.judged_calls import SubjectLost

    session = SerialCalls()
    session.judge = SimpleNamespace(device="cuda")
    with pytest.raises(SubjectLost, match="calls alone"):
        session._busy_alone({"busy": busy}, [1e-6] * 3)
    assert session._busy_alone({"busy": [1e-6, 2e-6, 3e-6]}, [None] * 3) == [1e-6, 2e-6, 3e-6]


def test_one_definition_of_shared_memory_serves_outputs_against_inputs_and_lanes_against_each_other():
    """A tensor's memory is the addresses of its elements, strides included: a view reaching into another
    tensor shares memory with it, a neighbour ending where the other starts does not."""
    buffer = torch.zeros(64)
    inp = buffer[16:32]
    assert lanes_module.shares_memory(buffer[10:20], inp)          # reaches into it from before
    assert lanes_module.shares_memory(buffer[0:64:8], inp)         # strided across it
    assert not lanes_module.shares_memory(buffer[0:16], inp)       # ends where it starts
    assert not lanes_module.shares_memory(buffer[32:48], inp)      # starts where it ends
    assert not lanes_module.shares_memory(buffer[0:0], inp)        # no elements
    assert lanes_module.overlap([[buffer[0:17]], [inp]]) and not lanes_module.overlap([[buffer[0:16]], [inp]])
