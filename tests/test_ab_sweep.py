"""The before/after helper of the session series scripts (.ci/ab-sweep): which runs it makes, in which
order, from which tree, each side with its own warm workers."""

import io
import os
import subprocess
import tarfile
from pathlib import Path

HELPER = Path(__file__).resolve().parent.parent / ".ci" / "ab-sweep"


def _tar_with_fake_cudabench(path: Path, log: Path) -> None:
    """A `git archive`-like tar whose cudabench logs its command line, where it runs and its runtime folder."""
    main = ("import os, sys\n"
            f"open({str(log)!r}, 'a').write('before ' + ' '.join(sys.argv[1:]) + ' | ' + os.getcwd() + ' | '"
            " + os.environ['XDG_RUNTIME_DIR'] + '\\n')\n").encode()
    with tarfile.open(path, "w") as tar:
        for name, data in (("cudabench/__init__.py", b""), ("cudabench/__main__.py", main)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_it_alternates_before_and_after_warming_both_first_on_one_gpu_and_on_all(tmp_path):
    log, logs, bin_ = tmp_path / "calls.txt", tmp_path / "logs", tmp_path / "bin"
    logs.mkdir()
    bin_.mkdir()
    _tar_with_fake_cudabench(tmp_path / "before.tar", log)
    fake = bin_ / "cudabench"
    fake.write_text(f'#!/usr/bin/env bash\necho "after $* | $PWD | $XDG_RUNTIME_DIR" >> {log}\n')
    fake.chmod(0o755)
    script = (f'step() {{ local name=$1; shift; echo "step $name" >> {log}; "$@"; }}\n'
              f'LOGS={logs}\nsource {HELPER}\nab_unpack {tmp_path / "before.tar"}\n'
              'ab_sweeps configs/timex-sweep.toml 2 all\nab_summary > /dev/null\n')
    env = {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", "AB_BEFORE": str(tmp_path / "before")}
    subprocess.run(["bash", "-c", script], cwd=HELPER.parents[1], env=env, check=True, timeout=120)
    lines = log.read_text().splitlines()
    steps = [line.split()[1] for line in lines if line.startswith("step ")]
    assert steps == ["warm-before-one", "warm-after-one", "warm-before-all", "warm-after-all",
                     "scale-before-one-1", "scale-after-one-1", "scale-before-all-1", "scale-after-all-1",
                     "scale-before-one-2", "scale-after-one-2", "scale-before-all-2", "scale-after-all-2"]
    runs = [line for line in lines if not line.startswith("step ")]
    befores = [r for r in runs if r.startswith("before run")]
    afters = [r for r in runs if r.startswith("after run")]
    assert len(befores) == len(afters) == 6
    assert all(r.endswith(f"| {tmp_path / 'before'} | /tmp/xdg-before") for r in befores)  # its tree, its workers
    assert all(r.endswith("| /tmp/xdg-after") and str(HELPER.parents[1]) in r for r in afters)
    assert f"--gpus all --json {logs}/before-all-2.json" in befores[-1]
    assert f"--json {logs}/timex-sweep-one-1.json" in afters[2]
    compares = [r for r in runs if r.startswith("after compare")]
    assert len(compares) == 3 and f"{logs}/timex-sweep-all-1.json" in compares[-1]
    assert any(r.startswith("after workers --stop") for r in runs)
