#!/usr/bin/env bash
# session 31 call E (one H200): after the native-thread reading (the last commit that touches GPU code): the attack
# matrix under events (hostile-native-thread among the attacks; the honest subject and the baseline beside them) and
# the warm-worker tests (a hostile subject, then an honest one in a later invocation)
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$LOGS/gpus.txt"
export XDG_RUNTIME_DIR=/tmp/xdg0; mkdir -m 700 -p $XDG_RUNTIME_DIR
python3 -m pytest -m gpu -rA -p no:cacheprovider tests/gpu/test_integrity_gpu.py -k "every_attack_class and events" > "$LOGS/pytest-attacks.log" 2>&1
python3 -m pytest -m gpu -rA -p no:cacheprovider tests/gpu/test_warm_gpu.py > "$LOGS/pytest-warm.log" 2>&1
for f in "$LOGS"/pytest-*.log; do echo "== $(basename "$f")"; grep -h -E "^(FAILED|ERROR)|^=+ .*(passed|failed|error)|^E  " "$f" | tail -8; done
