"""The same from pytest (the plugin is active wherever cudabench is installed):

    PYTHONPATH=examples/my_ops pytest examples/my_ops/test_gelu_speed.py -rs

Skipped, with the reason, where no GPU is usable."""


def test_gelu_is_correct_and_not_slower_than_last_time(cudabench, tmp_path):
    r = cudabench.bench("my_ops.ops:gelu_tanh", inputs="my_ops.bench:make_inputs",
                        reference="my_ops.bench:reference", shapes=[{"n": 1 << 24}])
    r.assert_correct()
    r.assert_not_slower_than(r)  # in your CI: a results file of main, or "main" in the results store
