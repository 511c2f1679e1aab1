"""Summarise honest runs' results files (LOGS/honest-*.json): the statuses of each run, and every subject that is
not ok or has a failed check or a noted thread, with the check's detail. Usage: honest_summary.py LOGS"""
import collections
import glob
import json
import os
import sys

for path in sorted(glob.glob(os.path.join(sys.argv[1], "honest-*.json"))):
    doc = json.load(open(path))
    results = doc["results"]
    print(os.path.basename(path), "wall %.1f" % doc["run_time"]["wall"], dict(collections.Counter(r["status"] for r in results)))
    for r in results:
        bad = [c for c in (r.get("integrity") or []) if c["verdict"] == "fail" or (c["name"] == "threads" and c["detail"])]
        if r["status"] != "ok" or bad:
            print("  ", r["subject"], r["case"]["key"], r["status"], r.get("error") or r.get("skipped") or "",
                  [(c["name"], c["detail"][:160]) for c in bad])
