#!/usr/bin/env bash
# session 30 call B (x2): the tree before the process hooks (before30.tar: `git archive f298ff3`) against the
# working tree (after: hooks and OS settings in the state guard, the finish collecting until no garbage is left
# before it restores, the open after a clean finish neither collecting nor restoring), alternately on one GPU
# and on both, every integrity check on
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
source .ci/ab-sweep
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$LOGS/gpus.txt"
step build cudabench build -k timex
ab_unpack scratch/before30.tar
ab_sweeps configs/timex-sweep.toml 2 all
printf '  %s\n' "${SUMMARY[@]}"
ab_summary
