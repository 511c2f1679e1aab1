#!/usr/bin/env bash
# session 31 call C (x2): the GPU tests after the guard's new comparisons (function internals, private values of
# harness modules, signals and POSIX timers as the kernel says them, readers bound at load) and the hello's
# priming: the integrity halves (the attack matrix with hostile-swap-code), the warm-worker tests, the clock
# readings, at the final tree
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
source .ci/gpu-tests-x2
gpu_tests_x2
