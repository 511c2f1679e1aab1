"""Suite files: parsing, sweep expansion, and an error naming file, key and expectation for every
kind of mistake. Every shipped config loads."""

from pathlib import Path

import pytest

from cudabench.results.config import expand_shape, load_suite, swept_parameters
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
