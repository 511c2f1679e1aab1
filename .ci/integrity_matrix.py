#!/usr/bin/env python3
"""Issue 27's records from results files: the attack x timer matrix (each subject's verdict and the
checks that flagged it, one column per timer) and the cost of the checks per subject; with --honest,
every subject of the shipped suites and whatever was not ok, with the judged-call ratios the
fresh-inputs and hot-loop checks compared.

    python3 .ci/integrity_matrix.py matrix-sync.json matrix-events.json ...
    python3 .ci/integrity_matrix.py --honest honest-sweep.json honest-attention.json ..."""

import json
import re
import statistics
import sys
from pathlib import Path

US = re.compile(r"([\d.]+) (µs|ms)")


def load(path):
    doc = json.loads(Path(path).read_text())
    return doc["results"], doc.get("environment", {})


def integrity_seconds(phases):
    """The integrity phase and its sub-phases (integrity/judged calls, integrity/cupti, ...)."""
    return sum(v for k, v in phases.items() if k == "integrity" or k.startswith("integrity/"))


def flagged(r):
    return [c["name"] for c in r.get("integrity") or [] if c["verdict"] == "fail"]


def cell(r):
    if r["status"] == "ok":
        med = r["stats"]["median"] * 1e6
        return f"ok, {med:.1f} µs"
    if r["status"] == "INVALID":
        return "INVALID: " + ", ".join(flagged(r))
    why = r.get("error") or r.get("skipped") or ""
    return f"{r['status']}: {why[:60]}"


def seconds(detail):
    found = [float(v) * (1e-3 if unit == "ms" else 1e-6) for v, unit in US.findall(detail)]
    return found


def ratios(results, name):
    out = []
    for r in results:
        for c in r.get("integrity") or []:
            if c["name"] == name:
                v = seconds(c["detail"])
                if len(v) >= 2 and v[1] > 0:
                    out.append(v[0] / v[1] if name == "fresh-inputs" else v[1] / v[0])
    return out


def matrix(paths):
    columns, rows, costs = [], {}, {}
    for path in paths:
        results, env = load(path)
        timer = results[0]["measurement"]["timing"] if results and results[0].get("measurement") else Path(path).stem
        if "cold" in Path(path).stem:
            timer += " --cold"
        if "pareto" in Path(path).stem:
            timer += " --inputs pareto"
        columns.append(timer)
        for r in results:
            rows.setdefault(r["subject"], {})[timer] = cell(r)
            phases = dict(r.get("phases") or {})
            if r["status"] == "ok":
                costs.setdefault(r["subject"], []).append((integrity_seconds(phases), phases.get("sampling", 0.0)))
    print(f"GPU: {env.get('gpu', '?')}, driver {env.get('driver', '?')}, torch {env.get('torch', '?')}, "
          f"{env.get('date', '?')}\n")
    print("| subject | " + " | ".join(columns) + " |")
    print("| --- |" + " --- |" * len(columns))
    for subject, cells in rows.items():
        print(f"| {subject} | " + " | ".join(cells.get(c, "") for c in columns) + " |")
    print("\n| honest subject | integrity checks s | timed sampling s |")
    print("| --- | ---: | ---: |")
    for subject, pairs in costs.items():
        print(f"| {subject} | " + f"{statistics.median(p[0] for p in pairs):.3f} | "
              f"{statistics.median(p[1] for p in pairs):.3f} |")


def honest(paths):
    total, bad = 0, []
    integrity_s = sampling_s = 0.0
    every = []
    for path in paths:
        results, env = load(path)
        every += results
        for r in results:
            total += 1
            phases = dict(r.get("phases") or {})
            integrity_s += integrity_seconds(phases)
            sampling_s += phases.get("sampling", 0.0)
            if r["status"] not in ("ok", "SKIP"):
                bad.append((Path(path).stem, r["subject"], r["case"]["direction"], r["status"],
                            r.get("error") or r.get("skipped") or "; ".join(
                                f"{c['name']}: {c['detail']}" for c in r.get("integrity") or [] if c["verdict"] == "fail")))
    ok = sum(1 for r in every if r["status"] == "ok")
    print(f"{total} results, {ok} ok, {sum(1 for r in every if r['status'] == 'SKIP')} skipped, {len(bad)} other")
    print(f"integrity checks {integrity_s:.1f} s, timed sampling {sampling_s:.1f} s (all subjects)")
    for name in ("fresh-inputs", "hot-loop"):
        v = sorted(ratios(every, name))
        if v:
            print(f"{name}: ratio median {statistics.median(v):.3f}, max {v[-1]:.3f}, min {v[0]:.3f} (n={len(v)})")
    for row in bad:
        print(" | ".join(str(x) for x in row))


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] == "--honest":
        honest(args[1:])
    else:
        matrix(args)
