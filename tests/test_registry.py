import pytest

from cudabench.errors import ConfigError, ShapeError, UnknownKernelError
from cudabench.spec.registry import discover


def test_shipped_families_and_variants(registry):
    assert [f.name for f in registry.families] == ["add2", "attention", "matmul", "sincos", "timex"]
    assert [v.name for _, v in registry.variants()] == [
        "add2", "add2-vec4", "add2-tile", "attn-naive", "attn-flash1", "attn-flash2", "attn-flash3", "matmul-naive", "matmul-tiled",
        "matmul-regtile", "matmul-wgmma", "sincos-fused",
        "timex-v1", "timex-v2", "timex-v3", "timex-v4", "timex-v5", "timex-fft", "timex-mma", "timex-wgmma"]
    for family in registry.families:
        assert family.baselines, f"{family.name} has a baseline to compare with"
        for source in family.source_paths():
            assert source.is_file()


def test_family_name_means_all_its_variants(registry):
    picked = [v.name for _, v in registry.resolve(["timex", "timex-v2"])]
    assert picked == ["timex-v1", "timex-v2", "timex-v3", "timex-v4", "timex-v5", "timex-fft", "timex-mma", "timex-wgmma"]


def test_unknown_kernel_suggests_close_names(registry):
    with pytest.raises(UnknownKernelError) as info:
        registry.resolve(["timx-v4"])
    assert "timex-v4" in info.value.hint


def test_extra_kernel_dir_must_exist(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        discover([tmp_path / "nope"])


def test_broken_spec_names_its_file(tmp_path):
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "spec.py").write_text("raise RuntimeError('boom')\n")
    with pytest.raises(ConfigError) as info:
        discover([tmp_path])
    assert "bad/spec.py" in info.value.message and "boom" in info.value.message


def test_duplicate_names_are_refused(tmp_path):
    import shutil

    from cudabench.spec.registry import builtin_kernels_dir

    shutil.copytree(builtin_kernels_dir() / "add2", tmp_path / "add2")
    with pytest.raises(ConfigError, match="already registered"):
        discover([tmp_path])


def test_timex_fft_runs_past_1024_up_to_its_own_limit(registry):
    """Only timex-fft (and the unbounded v1) take T beyond one block's row; past 16384 it says why."""
    from cudabench.engine.plan import RunOptions, plan, skips, subjects

    long = plan(registry, ["timex"], {"B": 16, "C": 256, "T": 4096}, RunOptions(directions=("fwd",)))
    case = long[0].cases[0]
    assert {s.name for s in subjects(long[0], case) if s.role == "variant"} == {"timex-v1", "timex-fft"}
    too_long = plan(registry, ["timex"], {"B": 2, "C": 4, "T": 16385}, RunOptions(directions=("fwd",)))
    why = {name: reason for name, _, reason in skips(too_long[0], too_long[0].cases[0])}
    assert "T must be at most 16384" in why["timex-fft"] and "T must be at most 2048" in why["timex-mma"]
    with pytest.raises(ShapeError, match="timex-fft cannot run at B=2,C=4,T=16385"):  # named alone
        plan(registry, ["timex-fft"], {"B": 2, "C": 4, "T": 16385}, RunOptions(directions=("fwd",)))


def scale_family(tmp_path, edit=lambda text: text):
    """examples/my_kernels/scale copied to tmp_path/k/scale, its spec.py passed through `edit`."""
    import shutil
    from pathlib import Path

    source = Path(__file__).parents[1] / "examples" / "my_kernels" / "scale"
    folder = tmp_path / "k" / "scale"
    shutil.copytree(source, folder)
    (folder / "spec.py").write_text(edit((folder / "spec.py").read_text()))
    return folder


@pytest.mark.parametrize("name", ["5", '""', '"../../etc"', '"a b"'])
def test_a_family_name_that_is_not_a_name_is_refused(tmp_path, name):
    scale_family(tmp_path, lambda text: text.replace('name="scale"', f"name={name}"))
    with pytest.raises(ConfigError, match="is not a name"):
        discover([tmp_path / "k"])


@pytest.mark.parametrize("raised", ["GeneratorExit", "KeyboardInterrupt", "type('Boom', (BaseException,), {})('x')",
                                    "type('Mute', (Exception,), {'__str__': lambda self: 1 / 0})()"])
def test_a_spec_raising_anything_is_one_paragraph_naming_it(tmp_path, raised):
    scale_family(tmp_path, lambda text: text + f"\nraise {raised}\n")
    with pytest.raises(ConfigError, match=r"spec.py:\d+ failed to load"):
        discover([tmp_path / "k"])


def test_a_source_that_is_a_fifo_is_refused_before_compiling(tmp_path):
    import os

    from cudabench.errors import BuildError
    from cudabench.spec.compile_check import check_compile

    folder = scale_family(tmp_path)
    (folder / "scale.cu").unlink()
    os.mkfifo(folder / "scale.cu")
    family = discover([tmp_path / "k"]).family("scale")
    with pytest.raises(BuildError, match="is a named pipe"):
        check_compile(family, "sm_90")


def test_no_kernel_name_is_an_error(registry):
    from cudabench.engine.plan import RunOptions, plan

    with pytest.raises(ShapeError, match="No kernel named"):
        plan(registry, ["", " "], {}, RunOptions())
