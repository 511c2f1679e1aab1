#!/usr/bin/env bash
# session 30 call C (x2): the GPU tests after the process hooks (the attack matrix now has hostile-signal-timer
# and hostile-finalizer), split over two GPUs (.ci/gpu-tests-x2)
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
source .ci/gpu-tests-x2
gpu_tests_x2
