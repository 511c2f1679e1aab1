"""Bench my_ops.ops:gelu_tanh against PyTorch's GELU, from Python:

    PYTHONPATH=examples/my_ops python examples/my_ops/bench_gelu.py

The op runs in cudabench's isolated workers, checked against the fp64 reference first."""

import sys

import cudabench

try:
    res = cudabench.bench("my_ops.ops:gelu_tanh", inputs="my_ops.bench:make_inputs", reference="my_ops.bench:reference",
                          shapes=[{"n": 1 << 20}, {"n": 1 << 24}], baselines=["my_ops.bench:torch_gelu"],
                          dtypes=["float32", "bfloat16"])
except cudabench.CudabenchError as exc:  # NoGPUError too: one paragraph, no traceback
    sys.exit(f"cudabench: {exc.message}{' ' + exc.hint if exc.hint else ''}")
res.table()
res.to_json("gelu.json")
res.assert_correct()
