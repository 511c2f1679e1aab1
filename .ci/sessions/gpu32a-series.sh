#!/usr/bin/env bash
# session 32 call A (x2): the GPU tests owed by the thirty-first session's last two commits (63059d4: interval timers
# stopped before their signals' handlers go back; df69ebc: internals compare through unchanged.same_objects), at
# df69ebc's tree: the integrity halves (the attack matrix), the warm-worker tests, the clock readings
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
source .ci/gpu-tests-x2
gpu_tests_x2
