"""The traced-sweep helper of the session series scripts (.ci/trace-sweep): a warm-up run, then the traced run,
both under the trace with their own warm workers, the workers stopped, the report written, and the caller's
environment as it was."""

import os
import subprocess
from pathlib import Path

HELPER = Path(__file__).resolve().parent.parent / ".ci" / "trace-sweep"


def test_it_runs_warm_then_traced_stops_the_workers_and_leaves_the_environment_as_it_was(tmp_path):
    log, logs, bin_ = tmp_path / "calls.txt", tmp_path / "logs", tmp_path / "bin"
    logs.mkdir()
    bin_.mkdir()
    fake = bin_ / "cudabench"
    fake.write_text(f'#!/usr/bin/env bash\necho "$* | ${{CB_TRACE:-}} | $PYTHONPATH | $XDG_RUNTIME_DIR" >> {log}\n'
                    f'[ -n "${{CB_TRACE:-}}" ] && touch "$CB_TRACE/trace-$RANDOM.jsonl"\nexit 0\n')
    fake.chmod(0o755)
    script = (f'step() {{ local name=$1; shift; echo "step $name" >> {log}; "$@"; }}\n'
              f'LOGS={logs}\nexport PYTHONPATH=/site XDG_RUNTIME_DIR=/tmp/xdg-mine\nsource {HELPER}\n'
              'trace_sweep configs/timex-sweep.toml\n'
              f'echo "after ${{CB_TRACE:-unset}} $PYTHONPATH $XDG_RUNTIME_DIR" >> {log}\n')
    env = {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", "TRACE_SETTLE": "0"}
    subprocess.run(["bash", "-c", script], cwd=HELPER.parents[1], env=env, check=True, timeout=120)
    lines = log.read_text().splitlines()
    trace, here = logs / "trace-one", HELPER.parents[1]
    assert [line.split()[1] for line in lines if line.startswith("step ")] == ["traced-one-warm", "traced-one"]
    runs = [line for line in lines if not line.startswith(("step ", "after "))]
    assert runs[0].startswith("run --config configs/timex-sweep.toml |")
    assert runs[1].startswith(f"run --config configs/timex-sweep.toml --json {logs}/traced.json |")
    assert runs[2].startswith("workers --stop |")
    for run in runs:  # each under the trace, with the trace's own warm workers
        assert run.endswith(f"| {trace} | {here}/.ci/harness_trace:/site | /tmp/xdg-trace")
    assert len(list(trace.glob("trace-*.jsonl"))) == 2  # the warm-up run's trace cleared, not the traced run's
    assert lines[-1] == "after unset /site /tmp/xdg-mine"
    assert (logs / "trace-report-one.txt").exists()
