#!/usr/bin/env bash
# session 32 call D (one GPU): who adds an audit hook in a first torch.compile (probe32_audit.py), and the crashes
# test again (call C: hostile-persist-l2 INVALID on hot-loop in it, 108.4 against 94.8 µs kernel time)
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
git log --oneline -1 > "$LOGS/head.txt" 2>/dev/null
step probe python3 .ci/sessions/probe32_audit.py
mkdir -m 700 -p /tmp/xdg0
XDG_RUNTIME_DIR=/tmp/xdg0 python3 -m pytest -m gpu -rA -p no:cacheprovider --durations=5 tests/gpu/test_integrity_gpu.py -k crashes > "$LOGS/pytest-crashes.log" 2>&1
printf '  %s\n' "${SUMMARY[@]}"
grep -v "^WARNING\|^\s*$" "$LOGS/probe.log" | head -40
grep -h -E "^E  |^(FAILED|ERROR)|^=+ .*(passed|failed|error)|s call" "$LOGS/pytest-crashes.log" | tail -12
