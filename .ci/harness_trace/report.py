"""Where a traced run's time went (see sitecustomize.py beside this file): the spans of each harness step
summed over the subjects one caller ran, and the caller's gaps between subjects. Without CALLER_PID, the
last run traced in DIR.

    python3 .ci/harness_trace/report.py DIR [CALLER_PID]
"""

import collections
import json
import sys
from pathlib import Path


def main(folder: str, caller: int = 0) -> None:
    events = [json.loads(line) for f in Path(folder).glob("trace-*.jsonl") for line in f.read_text().splitlines()]
    if not caller:
        runs = [e for e in events if e[2] == "Runner.run"]
        caller = max(runs, key=lambda e: e[3])[0] if runs else 0
    subjects = sorted((e for e in events if e[0] == caller and e[2] == "Lane.subject"), key=lambda e: e[3])
    if not subjects:
        sys.exit(f"no subjects of caller {caller} in {folder}")
    start, end = subjects[0][3], subjects[-1][4]
    total: dict = collections.defaultdict(float)
    count: collections.Counter = collections.Counter()
    for pid, prog, name, t0, t1, note in events:
        if t0 >= start - 0.01 and t1 <= end + 0.01:
            key = ("caller" if pid == caller else prog, name, note)
            total[key] += t1 - t0
            count[key] += 1
    print(f"{len(subjects)} subjects in {end - start:.2f} s")
    for key, seconds in sorted(total.items(), key=lambda kv: -kv[1]):
        print(f"{' '.join(k for k in key if k):60} {seconds:7.3f} s  n={count[key]:5d}  {1e3 * seconds / count[key]:7.1f} ms each")
    gaps = [b[3] - a[4] for a, b in zip(subjects, subjects[1:])]
    print(f"caller's gaps between subjects: {sum(gaps):.3f} s, {1e3 * sum(gaps) / max(1, len(gaps)):.1f} ms each")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) == 3 else 0)
