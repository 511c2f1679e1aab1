"""Suite files: parsing, sweep expansion, and an error naming file, key and expectation for every
kind of mistake. Every shipped config loads."""

import os
import threading
import time
from pathlib import Path

import pytest

from cudabench.engine.suite_file import MAX_SUITE_SHAPES, load_suite, swept_parameters
from cudabench.engine.suite_shapes import expand_shape
from cudabench.errors import ConfigError

CONFIGS = sorted((Path(__file__).resolve().parent.parent / "configs").glob("*.toml"))


def write(tmp_path, text, name="suite.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def failure(tmp_path, text) -> ConfigError:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_suite(path)
    assert str(path) in info.value.message
    return info.value


def test_a_full_suite(tmp_path):
    (tmp_path / "mine").mkdir()
    path = write(tmp_path, """
name = "mine"
description = "d"
kernels_dirs = ["mine"]
[timing]
timing = "events"
cold = true
repeat = 30
warmup = "100ms"
[[case]]
kernels = ["timex-v4", "timex-v3"]
shape = { B = 32, T = [256, 512] }
directions = ["fwd", "fwdbwd"]
baselines = []
[[case]]
kernels = "add2"
baselines = "all"
""")
    suite = load_suite(path)
    assert (suite.name, suite.description, suite.path) == ("mine", "d", path)
    assert suite.kernels_dirs == ((tmp_path / "mine").resolve(),)
    assert suite.timing.given() == {"timing": "events", "cold": True, "repeat": 30, "warmup": "100ms"}
    first, second = suite.cases
    assert first.kernels == ("timex-v4", "timex-v3") and first.directions == ("fwd", "fwdbwd")
    assert first.shapes == ({"B": 32, "T": 256}, {"B": 32, "T": 512}) and first.baselines == ()
    assert second.kernels == ("add2",) and second.shapes == ({},) and second.baselines == ("all",)
    assert second.directions is None
    assert swept_parameters(suite) == {"T"}


def test_defaults(tmp_path):
    suite = load_suite(write(tmp_path, '[[case]]\nkernels = ["add2"]\n', "my-suite.toml"))
    assert suite.name == "my-suite" and suite.description == "" and suite.kernels_dirs == ()
    assert suite.timing.given() == {} and suite.cases[0].baselines is None


@pytest.mark.parametrize("table, values", [
    ({"n": {"from": 64, "to": 1024, "times": 2}}, [64, 128, 256, 512, 1024]),
    ({"n": {"from": 64, "to": 1000, "times": 2}}, [64, 128, 256, 512]),          # stops below `to`
    ({"n": {"from": "2^16", "to": "2^28", "times": 4}}, [4**8, 4**9, 4**10, 4**11, 4**12, 4**13, 4**14]),
    ({"n": {"from": 64, "to": 320, "step": 64}}, [64, 128, 192, 256, 320]),
    ({"n": {"from": 5, "to": 5, "step": 3}}, [5]),
    ({"n": ["1_024", "2**11", 4096]}, [1024, 2048, 4096]),
    ({"n": [8, 8, 16]}, [8, 16]),                                                 # repeats dropped
])
def test_ranges_and_lists(table, values):
    assert [s["n"] for s in expand_shape(table, "f.toml: case[1].shape")] == values


def test_cartesian_product_in_written_order():
    shapes = expand_shape({"B": [8, 16], "C": 768, "T": {"from": 64, "to": 128, "times": 2}}, "x")
    assert shapes == [{"B": 8, "C": 768, "T": 64}, {"B": 8, "C": 768, "T": 128},
                      {"B": 16, "C": 768, "T": 64}, {"B": 16, "C": 768, "T": 128}]


def test_a_list_of_tables_moves_parameters_together():
    shapes = expand_shape([{"M": 512, "N": 512}, {"M": [1024, 2048], "N": 1024}], "x")
    assert shapes == [{"M": 512, "N": 512}, {"M": 1024, "N": 1024}, {"M": 2048, "N": 1024}]


@pytest.mark.parametrize("text, key, expected", [
    ('[[case]]\nkernels = ["t"]\nshape = { T = "abc" }', "case[1].shape.T", "a whole number"),
    ('[[case]]\nkernels = ["t"]\nshape = { T = -4 }', "case[1].shape.T", "a whole number"),
    ('[[case]]\nkernels = ["t"]\nshape = { T = 6.5 }', "case[1].shape.T", "a whole number"),
    ('[[case]]\nkernels = ["t"]\nshape = { T = true }', "case[1].shape.T", "a whole number"),
    ('[[case]]\nkernels = ["t"]\nshape = { T = [] }', "case[1].shape.T", "non-empty list"),
    ('[[case]]\nkernels = ["t"]\nshape = { T = [64, -1] }', "case[1].shape.T[2]", "a whole number"),
    ('[[case]]\nkernels = ["a"]\n[[case]]\nkernels = ["t"]\nshape = { T = { from = 64, to = 32, times = 2 } }',
     "case[2].shape.T.to", "not below from = 64"),
    ('[[case]]\nkernels = ["t"]\nshape = { T = { to = 32, times = 2 } }', "case[1].shape.T.from", "got nothing"),
    ('[[case]]\nkernels = ["t"]\nshape = { T = { from = 1, to = 32 } }', "case[1].shape.T", "exactly one of 'times'"),
    ('[[case]]\nkernels = ["t"]\nshape = { T = { from = 1, to = 32, times = 1 } }', "case[1].shape.T.times",
     "at least 2"),
    ('[[case]]\nkernels = ["t"]\nshape = { T = { from = 1, to = "2^28", step = 1 } }', "case[1].shape.T",
     "more than 10000"),
    ('[[case]]\nkernels = ["t"]\nshape = { T = { from = 1, to = 32, stride = 2 } }', "case[1].shape.T",
     "unknown key 'stride'"),
    ('[[case]]\nkernels = ["t"]\nshape = 5', "case[1].shape", "a table such as"),
    ('[[case]]\nkernels = ["t"]\nshape = [5]', "case[1].shape[1]", "a table such as"),
    ('[[case]]\nshape = { T = 64 }', "case[1].kernels", "a list of names"),
    ('[[case]]\nkernels = []', "case[1].kernels", "at least one kernel"),
    ('[[case]]\nkernels = [3]', "case[1].kernels", "a list of names"),
    ('[[case]]\nkernels = ["t"]\ndirections = ["fwd", "sideways"]', "case[1].directions[2]", "fwd, bwd, fwdbwd"),
    ('[[case]]\nkernels = ["t"]\ndirections = []', "case[1].directions", "at least one"),
    ('[[case]]\nkernels = ["t"]\nbaselines = 3', "case[1].baselines", "a list of names"),
    ('[[case]]\nkernels = ["t"]\nshap = { T = 64 }', "case[1]", "unknown key 'shap'"),
    ('nmae = "x"\n[[case]]\nkernels = ["t"]', "top level", "unknown key 'nmae'"),
    ('name = 3\n[[case]]\nkernels = ["t"]', "name", "a string"),
    ('kernels_dirs = ["nowhere"]\n[[case]]\nkernels = ["t"]', "kernels_dirs[1]", "does not exist"),
    ('[timing]\ntiming = "sundial"\n[[case]]\nkernels = ["t"]', "timing.timing", "sync, events, graph, cupti"),
    ('[timing]\ncold = "yes"\n[[case]]\nkernels = ["t"]', "timing.cold", "true or false"),
    ('[timing]\nrepeat = 0\n[[case]]\nkernels = ["t"]', "timing.repeat", "must be positive (got 0)"),
    ('[timing]\nrepeat = 2.5\n[[case]]\nkernels = ["t"]', "timing.repeat", "a positive integer"),
    ('[timing]\nnoise = -1.0\n[[case]]\nkernels = ["t"]', "timing.noise", "must be positive (got -1)"),
    ('[timing]\nnoise = 2.0\n[[case]]\nkernels = ["t"]', "timing.noise", "must be at most 1"),
    ('[timing]\nmax_time = 1e9\n[[case]]\nkernels = ["t"]', "timing.max_time", "must be at most 86400 seconds"),
    ('[timing]\nmin_time = nan\n[[case]]\nkernels = ["t"]', "timing.min_time", "a positive number"),
    ('[timing]\nwarmup = "5000000s"\n[[case]]\nkernels = ["t"]', "timing.warmup", "must be at most 86400"),
    ('[timing]\nwarmup = "-5ms"\n[[case]]\nkernels = ["t"]', "timing.warmup", "a number of calls"),
    ('[timing]\nwarmup = "lots"\n[[case]]\nkernels = ["t"]', "timing.warmup", "a number of calls"),
    ('[timing]\nrepeat = 5\nmin_time = 1.0\n[[case]]\nkernels = ["t"]', "timing", "alternatives"),
    ('[timing]\nrepet = 5\n[[case]]\nkernels = ["t"]', "timing", "unknown key 'repet'"),
    ('timing = "sync"\n[[case]]\nkernels = ["t"]', "timing", "a [timing] table"),
    ('name = "x"', "case", "at least one [[case]]"),
    ('[case]\nkernels = ["t"]', "case", "[[case]] tables (double brackets)"),
])
def test_every_mistake_names_file_key_and_expectation(tmp_path, text, key, expected):
    error = failure(tmp_path, text)
    assert f": {key}" in error.message and expected in error.message


@pytest.mark.parametrize("text, suggestion", [
    ('[[case]]\nkernels = ["t"]\nshap = { T = 64 }', "Did you mean 'shape'?"),
    ('[[case]]\nkernels = ["t"]\ndirections = ["fwdbw"]', "Did you mean 'fwdbwd'?"),
    ('[timing]\ntiming = "event"\n[[case]]\nkernels = ["t"]', "Did you mean 'events'?"),
])
def test_close_names_are_suggested(tmp_path, text, suggestion):
    assert failure(tmp_path, text).hint == suggestion


def test_broken_toml_is_a_config_error_with_its_line(tmp_path):
    error = failure(tmp_path, 'name = oops\n[[case]]\nkernels = ["t"]\n')
    assert "not valid TOML" in error.message and "line" in error.message


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_suite(tmp_path / "nope.toml")


def test_shipped_configs_are_there():
    assert {p.name for p in CONFIGS} >= {"timex.toml", "timex-sweep.toml", "add2.toml", "matmul.toml"}


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_shipped_config_loads(path):
    suite = load_suite(path)
    assert suite.cases and all(c.kernels and c.shapes for c in suite.cases)


def test_shipped_sweeps_expand_as_documented():
    by_name = {p.name: load_suite(p) for p in CONFIGS}
    t_sweep, b_sweep = by_name["timex-sweep.toml"].cases
    assert [s["T"] for s in t_sweep.shapes] == [64, 128, 256, 512, 1024]
    assert [s["B"] for s in b_sweep.shapes] == [8, 16, 32, 64] and b_sweep.directions == ("fwd",)
    assert swept_parameters(by_name["timex-sweep.toml"]) == {"B", "T"}
    assert [s["n"] for s in by_name["add2.toml"].cases[0].shapes] == [2**k for k in range(16, 29, 2)]
    assert [(s["M"], s["N"], s["K"]) for s in by_name["matmul.toml"].cases[0].shapes] == [
        (m, m, m) for m in (512, 1024, 2048, 4096)]
    ladder = by_name["timex.toml"].cases[0]
    assert ladder.shapes == ({"B": 32, "C": 768, "T": 768},) and ladder.directions == ("fwd", "fwdbwd")
    assert ladder.baselines == ("conv1d",) and swept_parameters(by_name["timex.toml"]) == set()


def test_shipped_configs_name_real_kernels_and_baselines(registry):
    for path in CONFIGS:
        for case in load_suite(path).cases:
            for family, _ in registry.resolve(case.kernels):
                for name in case.baselines or ():
                    assert name == "all" or family.baseline(name)


@pytest.mark.parametrize("value, expected", [('"all"', "all"), ("[0, 2]", "0,2"), ("[1]", "1")])
def test_gpus_and_cluster_keys(tmp_path, value, expected):
    suite = load_suite(write(tmp_path, f'gpus = {value}\ncluster = "tcp://head:8786"\n[[case]]\nkernels = ["add2"]\n'))
    assert suite.gpus == expected and suite.cluster == "tcp://head:8786"
    assert load_suite(write(tmp_path, '[[case]]\nkernels = ["add2"]\n')).gpus is None


@pytest.mark.parametrize("value", ['"some"', "[]", "[-1]", "[true]", "2", '["0"]'])
def test_gpus_key_mistakes(tmp_path, value):
    error = failure(tmp_path, f'gpus = {value}\n[[case]]\nkernels = ["add2"]\n')
    assert 'gpus: expected "all" or a list of GPU indices' in error.message


# ---- hostile suite files (issue 31) -------------------------------------------------------------------

def test_a_suite_nested_thousands_deep_is_one_message(tmp_path):
    error = failure(tmp_path, "name = " + "[" * 5000 + "]" * 5000 + '\n[[case]]\nkernels = ["t"]\n')
    assert "not valid TOML" in error.message and "nest 5000 deep" in error.message


def test_an_integer_of_ten_thousand_digits_is_one_message(tmp_path):
    error = failure(tmp_path, '[[case]]\nkernels = ["t"]\nshape = { T = ' + "9" * 10_000 + " }\n")
    assert "a number of 10000 digits at line 3, column 15" in error.message


def test_a_deep_value_from_dotted_keys_is_shown_short(tmp_path):
    """tomllib builds dotted keys without recursing; the message quoting the value must not recurse either."""
    error = failure(tmp_path, "name." + ".".join(["a"] * 3000) + ' = 1\n[[case]]\nkernels = ["t"]\n')
    assert "name: expected a string" in error.message and len(error.message) < 600


def test_a_long_wrong_value_is_quoted_short(tmp_path):
    error = failure(tmp_path, "[[case]]\nkernels = [" + ", ".join(["1"] * 10_000) + "]\n")
    assert "case[1].kernels: expected a list of names" in error.message and len(error.message) < 600


@pytest.mark.parametrize("make, fragment", [
    (lambda tmp: Path("/dev/zero"), "character device"),
    (lambda tmp: (os.mkfifo(tmp / "suite.toml"), tmp / "suite.toml")[1], "named pipe (FIFO)"),
    (lambda tmp: tmp, "a folder"),
])
def test_a_suite_path_that_is_not_a_file_is_refused_at_once(tmp_path, make, fragment):
    path = make(tmp_path)
    done = []
    thread = threading.Thread(target=lambda: done.append(_error_of(lambda: load_suite(path))), daemon=True)
    thread.start()
    thread.join(5)
    assert done, "load_suite blocked"
    assert str(path) in done[0].message and fragment in done[0].message


def _error_of(call):
    try:
        call()
    except ConfigError as exc:
        return exc
    raise AssertionError("no ConfigError")


def test_an_oversized_suite_file_is_refused_with_the_limit(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDABENCH_MAX_INPUT_BYTES", "100")
    error = failure(tmp_path, "# " + "x" * 200 + '\n[[case]]\nkernels = ["t"]\n')
    assert "too large" in error.message and "100 bytes" in error.message


def sweep_suite(tmp_path, cases, shapes, name="sweep.toml"):
    return write(tmp_path, "".join(f'[[case]]\nkernels = ["add2"]\nshape = {{ n = {{ from = {i + 1}, '
                                   f'to = {i + shapes}, step = 1 }} }}\n' for i in range(cases)), name)


def test_a_suite_past_the_limit_is_refused_before_it_is_expanded(tmp_path):
    """300 cases × 10,000 shapes: 117 s and 2.5 GB to plan before; now refused in milliseconds."""
    path = sweep_suite(tmp_path, 300, 10_000)
    start = time.perf_counter()
    with pytest.raises(ConfigError) as info:
        load_suite(path)
    assert time.perf_counter() - start < 2
    assert "expands to 3,000,000 shapes over its 300 case(s), more than 100,000" in info.value.message


def test_a_list_of_tables_counts_toward_the_limit(tmp_path):
    tables = ", ".join(f"{{ n = {{ from = {k}, to = {k + 9_999}, step = 1 }} }}" for k in range(1, 12))
    error = failure(tmp_path, f'[[case]]\nkernels = ["add2"]\nshape = [{tables}]\n')
    assert "expands to 110,000 shapes over its 1 case(s)" in error.message


def test_a_suite_at_the_limit_expands_fast_and_in_order(tmp_path):
    start = time.perf_counter()
    suite = load_suite(sweep_suite(tmp_path, 10, 10_000))
    assert time.perf_counter() - start < 5  # about 0.05 s on a laptop; linear in the shapes
    assert sum(len(c.shapes) for c in suite.cases) == MAX_SUITE_SHAPES
    assert [s["n"] for s in suite.cases[3].shapes[:3]] == [4, 5, 6] and suite.cases[3].shapes[-1] == {"n": 10_003}


def test_repeats_across_tables_of_a_case_are_dropped_in_order():
    shapes = expand_shape([{"M": [1, 2], "N": 8}, {"M": [2, 3], "N": 8}], "x")
    assert shapes == [{"M": 1, "N": 8}, {"M": 2, "N": 8}, {"M": 3, "N": 8}]


def test_an_unknown_kernel_in_a_suite_names_the_file_and_the_case(tmp_path):
    from cudabench.engine.plan import RunOptions
    from cudabench.engine.suite import plan_suite
    from cudabench.errors import UnknownKernelError
    from cudabench.spec.registry import discover

    path = write(tmp_path, '[[case]]\nkernels = ["add2"]\n[[case]]\nkernels = ["nope"]\n')
    with pytest.raises(UnknownKernelError) as info:
        plan_suite(discover(), load_suite(path), RunOptions())
    assert info.value.message.startswith(f"{path}, case 2: Unknown kernel 'nope'")
