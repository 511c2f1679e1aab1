"""A traced run's timeline (see sitecustomize.py beside this file), for the last three callers traced in DIR:
seconds from the command's start to its run, each lane's span, the run's end and the process's end, and each
judge's subjects with the time it spent between them.

    python3 .ci/harness_trace/timeline.py DIR
"""
import collections
import json
import sys
from pathlib import Path

files = {f: [json.loads(line) for line in f.read_text().splitlines()] for f in Path(sys.argv[1]).glob("trace-*.jsonl")}
events = [e for evs in files.values() for e in evs]
# the command forks the process that runs it (cli/supervise.py): that file starts with the parent's start
started = {e[0]: evs[0][3] for evs in files.values() for e in evs if e[2] == "Runner.run"}
callers = sorted(started, key=lambda pid: started[pid])
for pid in callers[-3:]:
    mine = [e for e in events if e[0] == pid]
    t0 = started[pid]

    def span(name):
        found = [e for e in mine if e[2] == name]
        return (min(e[3] for e in found) - t0, max(e[4] for e in found) - t0) if found else (float("nan"),) * 2

    run, end = span("Runner.run"), span("process end")
    print(f"caller {pid} (seconds from the command's start): run {run[0]:.3f}-{run[1]:.3f}, process end {end[1]:.3f}")
    for s in sorted((e for e in mine if e[2] == "Runner._serve"), key=lambda e: e[3]):
        print(f"   a lane served {s[3] - t0:.3f}-{s[4] - t0:.3f}")
    judges = collections.defaultdict(list)
    for e in events:
        if e[2] == "Judge.run" and t0 + run[0] <= e[3] <= t0 + run[1]:
            judges[e[0]].append(e)
    for judge, runs in judges.items():
        runs.sort(key=lambda e: e[3])
        gaps = [b[3] - a[4] for a, b in zip(runs, runs[1:])]
        print(f"   judge {judge}: {len(runs)} subjects {runs[0][3] - t0:.3f}-{runs[-1][4] - t0:.3f}, judging "
              f"{sum(e[4] - e[3] for e in runs):.3f} s, between subjects {sum(gaps):.3f} s (at most {max(gaps, default=0):.3f})")
