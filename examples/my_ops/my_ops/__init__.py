"""A user's package with a custom CUDA op (gelu.cu, its binding gelu.cpp, built by torch's load() in
ops.py), benchmarked from Python (examples/my_ops/bench_gelu.py) and from pytest
(examples/my_ops/test_gelu_speed.py) without a kernel family folder."""
