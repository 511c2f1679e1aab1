"""How the judge catches hostile-partial-skip under sync timing, run after run: its status and the verdicts
of the checks that may flag it (session 29: once it was INVALID on `distribution` alone, outside the class's
expected checks). One warm runner, N runs of hostile-honest + hostile-partial-skip at n = 2^24.

    python3 .ci/sessions/probe29_partial_skip.py N [TIMING]   (from the repository root, with tests/ importable)
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path.cwd() / "tests"))

from cudabench.engine.plan import RunOptions, plan  # noqa: E402
from cudabench.measure.loop import Warmup  # noqa: E402
from cudabench.measure.stop import FixedCount  # noqa: E402
from cudabench.spec.registry import discover  # noqa: E402
from runs import process_runner  # noqa: E402

HOSTILE = Path.cwd() / "tests" / "hostile_kernels"
CHECKS = ("fresh-output", "fresh-inputs", "hot-loop", "impossible", "distribution")


def main(count: int, timing: str) -> None:
    hostile = discover([HOSTILE])
    options = RunOptions(rule=FixedCount(20), warmup=Warmup(3, 0.0), timeout=60.0, timing=timing)
    tasks = plan(hostile, ["hostile-honest", "hostile-partial-skip"], {"n": 1 << 24}, options)
    with process_runner(options, [HOSTILE]) as runner:
        for i in range(count):
            results = {r.subject: r for r in runner.run(tasks)}
            r, honest = results["hostile-partial-skip"], results["hostile-honest"]
            verdicts = {c.name: c for c in r.integrity}
            flagged = [n for n in CHECKS if n in verdicts and verdicts[n].failed]
            print(f"run {i}: honest {honest.status} {honest.stats.median * 1e6:.1f} µs; partial-skip {r.status} "
                  f"{r.stats.median * 1e6 if r.stats else 0:.1f} µs, flagged {flagged}", flush=True)
            for name in ("fresh-output", "fresh-inputs", "hot-loop"):
                c = verdicts.get(name)
                if c is not None:
                    print(f"    {name}: {c.verdict}: {c.detail[:230]}", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "sync")
