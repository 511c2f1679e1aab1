#!/usr/bin/env bash
# session 29 call B (x2): the trace commit before the prepared draws (before29.tar: `git archive 3d155b7`,
# the tree before it) against the working tree (after: the judged calls' draws made while the subject process opens),
# alternately on one GPU and on both
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
source .ci/ab-sweep
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$LOGS/gpus.txt"
git log --oneline -1 > "$LOGS/head.txt" 2>/dev/null
step build cudabench build -k timex
ab_unpack scratch/before29.tar
ab_sweeps configs/timex-sweep.toml 2 all
printf '  %s\n' "${SUMMARY[@]}"
ab_summary
