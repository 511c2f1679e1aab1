#!/usr/bin/env bash
# session 28 call D (one GPU, left-over device time): probe28_alternation.py twice
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$LOGS/gpus.txt"
for i in 1 2; do timeout 100 python3 .ci/sessions/probe28_alternation.py 2>&1 | tail -3 | tee -a "$LOGS/probe28.log"; done
