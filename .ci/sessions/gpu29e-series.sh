#!/usr/bin/env bash
# session 29 call E (x1): the attack matrix under sync and events with hostile-partial-skip's sync clause (call C's
# one failure), at the tree whose other GPU tests passed in call C
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
git log --oneline -1 > "$LOGS/head.txt" 2>/dev/null
step pytest-attacks python3 -m pytest -m gpu -rA -p no:cacheprovider tests/gpu/test_integrity_gpu.py -k "every_attack_class and (sync or events)"
printf '  %s\n' "${SUMMARY[@]}"
grep -h -E "^(FAILED|ERROR|PASSED)|^=+ .*(passed|failed|error)" "$LOGS/pytest-attacks.log" | tail -8
