#!/usr/bin/env bash
# session 31 call D (one H200): the attack matrix under cupti and events again, after the matrix takes
# hostile-partial-skip caught on any check that reads a call on new values (call C, cupti: distribution and
# stream-order caught it, its checked calls had all done their work)
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$LOGS/gpus.txt"
export XDG_RUNTIME_DIR=/tmp/xdg0; mkdir -m 700 -p $XDG_RUNTIME_DIR
python3 -m pytest -m gpu -rA -p no:cacheprovider tests/gpu/test_integrity_gpu.py -k "every_attack_class and (cupti or events)" > "$LOGS/pytest-attacks.log" 2>&1
for f in "$LOGS"/pytest-*.log; do echo "== $(basename "$f")"; grep -h -E "^(FAILED|ERROR|PASSED)|^=+ .*(passed|failed|error)" "$f" | tail -8; done
