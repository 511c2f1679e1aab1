#!/usr/bin/env bash
# session 27 call B (x2): 542cfe9 (before) against the working tree (after: mutation counts read with the call's
# synchronize, no collect at finish, CUPTI pass 3-10 calls, one read back per relative error), one GPU and both;
# then the after tree traced on one GPU
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
source .ci/ab-sweep
source .ci/trace-sweep
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$LOGS/gpus.txt"
git log --oneline -1 > "$LOGS/head.txt" 2>/dev/null
step build cudabench build -k timex
ab_unpack scratch/before27.tar
ab_sweeps configs/timex-sweep.toml 2 all
trace_sweep configs/timex-sweep.toml
printf '  %s\n' "${SUMMARY[@]}"
ab_summary
echo "traced: $(grep -h '^time:' -A1 $LOGS/traced-one.log | tr '\n' ' ' | cut -c1-230)"
