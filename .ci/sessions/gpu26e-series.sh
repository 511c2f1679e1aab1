#!/usr/bin/env bash
# session 26 call E (x2, call D's machine still warm, 3e78111): the sweep once on one GPU (honest subjects with
# four of six new draws read; the cost of the two more references)
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
git log --oneline -1 > "$LOGS/head.txt" 2>/dev/null
step build cudabench build -k timex
export XDG_RUNTIME_DIR=/tmp/xdg-e; mkdir -m 700 -p $XDG_RUNTIME_DIR
step warm-one cudabench run --config configs/timex-sweep.toml
step scale-timex-sweep-one-1 cudabench run --config configs/timex-sweep.toml --json "$LOGS/timex-sweep-one-1.json"
printf '  %s\n' "${SUMMARY[@]}"
for f in "$LOGS"/warm-one.log "$LOGS"/scale-*.log; do echo "$(basename $f): $(grep -h '^time:' -A1 $f | tr '\n' ' ' | cut -c1-330)"; grep -h "isolation:" $f; done
