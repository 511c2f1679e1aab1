#!/usr/bin/env bash
# session 29 call C (x2, bb48ab1: the last commit that touches GPU code): integrity halves on GPU 0 and 1, warm
# workers and the clock readings' tests on GPU 0, the timing-truth tests that use CUPTI on GPU 1 (as it ran, its
# two-GPU split since written once in .ci/gpu-tests-x2)
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
source .ci/gpu-tests-x2
gpu1_after() {
  python3 -m pytest -m gpu -rA -p no:cacheprovider tests/gpu/test_timing_truth.py -k "cupti or short_kernel or every_timing_mode" > "$LOGS/pytest-cupti.log" 2>&1
}
gpu_tests_x2
