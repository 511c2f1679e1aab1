#!/usr/bin/env bash
# session 24 call E (x1, same machine as D): the warm-worker GPU tests, then the sweep at the final tree (warm)
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
git log --oneline -1 > "$LOGS/head.txt" 2>/dev/null
step pytest-warm python3 -m pytest -m gpu -rA -q tests/gpu/test_warm_gpu.py
step sweep-warm cudabench run --config configs/timex-sweep.toml
sleep 10
step sweep-one cudabench run --config configs/timex-sweep.toml --json "$LOGS/sweep-one.json"
printf '  %s\n' "${SUMMARY[@]}"
grep -h -E "^(FAILED|ERROR)|passed|failed" "$LOGS"/pytest-*.log | tail -5
for f in "$LOGS"/sweep-*.log; do echo "$(basename $f): $(grep -h '^time:' -A1 $f | tr '\n' ' ' | cut -c1-260)"; done
grep -cE "INVALID|ERROR" "$LOGS/sweep-one.log"
