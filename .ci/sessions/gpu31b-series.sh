#!/usr/bin/env bash
# session 31 call B (x2): the first subject's overrun in a fresh process, plain and primed as a subject process's
# hello now primes it (probe31_first_subject.py); then 780accb ("before": scratch/before31.tar is
# `git archive 780accb`) against the working tree (the guard's new comparisons, the hello's priming), alternately on
# one GPU and on both, every integrity check on
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
source .ci/ab-sweep
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$LOGS/gpus.txt"
git log --oneline -1 > "$LOGS/head.txt" 2>/dev/null
step probe-plain python3 .ci/sessions/probe31_first_subject.py
step probe-primed python3 .ci/sessions/probe31_first_subject.py --primed
step build cudabench build -k timex
ab_unpack scratch/before31.tar
ab_sweeps configs/timex-sweep.toml 2 all
printf '  %s\n' "${SUMMARY[@]}"
cat "$LOGS/probe-plain.log" "$LOGS/probe-primed.log"
ab_summary
python3 - "$LOGS" <<'PY'
import json, sys, glob, os
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*-[12].json"))):
    d = json.load(open(f)); firsts = {}
    for r in d["results"]:
        firsts.setdefault(r.get("gpu_index"), r)
    print(os.path.basename(f), "wall %.2f" % d["run_time"]["wall"], "first subjects' sampling",
          [(g, r["subject"], round(r["phases"].get("sampling", 0), 3)) for g, r in firsts.items()])
PY
