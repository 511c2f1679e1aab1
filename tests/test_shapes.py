import pytest

from cudabench.errors import ShapeError
from cudabench.spec.shapes import check_shape, complete_shape, parse_shape, parse_value


def test_values_plain_underscored_and_powers():
    assert [parse_value(v) for v in ["768", "1_048_576", "2^20", "2**10"]] == [768, 2**20, 2**20, 1024]


def test_parse_shape():
    assert parse_shape("B=32, C=768,T=768") == {"B": 32, "C": 768, "T": 768}
    assert parse_shape("") == {}


@pytest.mark.parametrize("text, fragment", [
    ("B32", "NAME=VALUE"), ("B=3x", "not a whole number"), ("B=-1", "must not be negative"), ("B=1,B=2", "twice"),
])
def test_bad_shapes_name_the_problem(text, fragment):
    with pytest.raises(ShapeError) as info:
        parse_shape(text)
    assert fragment in info.value.message + info.value.hint


def test_defaults_fill_in_and_unknown_names_are_rejected(registry):
    timex = registry.family("timex")
    assert complete_shape(timex, {"T": 256}) == {"B": 32, "C": 768, "T": 256}
    with pytest.raises(ShapeError, match="no shape parameter Q"):
        complete_shape(timex, {"Q": 3})


def test_constraint_breach_names_the_rule(registry):
    timex = registry.family("timex")
    v3 = timex.variant("timex-v3")
    with pytest.raises(ShapeError) as info:
        check_shape(timex, v3, complete_shape(timex, {"T": 766}))
    assert "T must be a multiple of 4" in info.value.message and "T=766" in info.value.message
    check_shape(timex, timex.variant("timex-v1"), complete_shape(timex, {"T": 766}))  # v1 takes any T


def test_v4_needs_batch_multiple_of_8(registry):
    timex = registry.family("timex")
    with pytest.raises(ShapeError, match="B must be a multiple of 8"):
        check_shape(timex, timex.variant("timex-v4"), complete_shape(timex, {"B": 12}))


def test_a_flag_parameter_takes_zero_and_others_do_not(registry):
    from cudabench.spec.shapes import complete_shape

    family = registry.family("attention")
    assert complete_shape(family, parse_shape("causal=0,N=130"))["causal"] == 0
    with pytest.raises(ShapeError) as info:
        complete_shape(family, parse_shape("N=0"))
    assert "N must be positive (got 0)" in info.value.message


@pytest.mark.parametrize("variant", ["add2-tile", "timex-v4", "matmul-tiled", "attn-flash2"])
def test_the_first_random_shape_is_ragged_so_a_kernel_right_only_at_whole_tiles_fails_every_run(registry, variant):
    """Two shapes drawn at random were both multiples of 1024 about one run in forty (a GPU test's
    hostile-shape passed that way): the first now has a size with at most two factors of two wherever
    the constraints allow one. Not always odd: a kernel right at odd sizes and at whole tiles only
    would pass that every time."""
    import random

    from cudabench.spec.fuzz import random_shapes
    from cudabench.spec.shapes import violation

    family = next(f for f in registry.families if any(v.name == variant for v in f.variants))
    v = family.variant(variant)
    odd = 0
    for seed in range(300):
        shapes = random_shapes(family, v, 2, random.Random(seed))
        assert len(shapes) == 2 and shapes[0] != shapes[1]
        assert all(violation(family, v, s) is None for s in shapes)
        sizes = [n for p, n in zip(family.params, shapes[0].values()) if not (p.minimum == 0 and p.default <= 1)]
        assert any(n % 8 for n in sizes), (seed, shapes[0])
        odd += all(n % 2 for n, p in zip(sizes, family.params) if p.name in ("n", "C", "M"))
    if variant in ("add2-tile", "timex-v4"):
        assert 0.2 < odd / 300 < 0.5, odd
