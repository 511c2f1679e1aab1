"""Precision as a dimension of a case (issue 13, part 1), on the CPU: planning, skips, inputs in the
dtype, the tolerance rule, the bytes counted, and what tables, files and compare carry."""

from dataclasses import replace

import pytest
import torch

from cudabench.engine.plan import RunOptions, check_dtypes, plan, skips, subjects
from cudabench.errors import ShapeError
from cudabench.measure.loop import Warmup
from cudabench.measure.stop import FixedCount
from cudabench.measure.subject import case_inputs, work_of
from cudabench.results.report import terminal as report
from cudabench.results.exporters.json_document import document
from cudabench.results.exporters.rows import flat_rows
from cudabench.results.records.model import Case
from runs import inline_runner
from synthetic import ENV
from fakes import FakeTimer

SMALL = {"B": 8, "C": 3, "T": 16}


def test_each_dtype_is_a_case_and_subjects_without_it_are_skipped_with_the_reason(registry):
    tasks = plan(registry, ["timex"], SMALL, RunOptions(directions=("fwd",), dtypes=("float32", "bfloat16")))
    cases = tasks[0].cases
    assert [c.dtype for c in cases] == ["float32", "bfloat16"]
    assert cases[1].key == "timex[B=8,C=3,T=16,bfloat16]/fwd" and cases[0].key == "timex[B=8,C=3,T=16]/fwd"
    # timex-fft takes every precision, timex-mma and timex-wgmma only the low ones; the direct-sum ladder is float32 only
    assert {s.name for s in subjects(tasks[0], cases[1])} == {"timex-fft", "timex-mma", "timex-wgmma", "conv1d"}
    skipped = {name: why for name, _, why in skips(tasks[0], cases[1])}
    assert skipped["timex-v4"] == "dtype: timex-v4 supports float32 only"
    assert skips(tasks[0], cases[0])[0][0] == "timex-mma" and "float32" not in registry.family("timex").variant(
        "timex-mma").dtypes
    assert len(subjects(tasks[0], cases[0])) == 7


def test_unknown_or_unsupported_dtypes_are_user_errors(registry):
    with pytest.raises(ShapeError, match="Unknown dtype 'float8'"):
        plan(registry, ["add2"], {}, RunOptions(dtypes=("float8",)))
    narrow = replace(registry.family("add2"), dtypes=("float32",))  # a family that makes float32 only
    with pytest.raises(ShapeError, match="add2 has no bfloat16 inputs") as caught:
        check_dtypes(narrow, ("bfloat16",))
    assert "Its dtypes: float32" in caught.value.hint


def test_inputs_and_upstream_gradient_come_in_the_case_dtype(registry):
    family = registry.family("timex")
    inputs, grad = case_inputs(family, Case("timex", tuple(SMALL.items()), "fwdbwd", dtype="bfloat16"), 3, "cpu")
    assert inputs["w"].dtype == inputs["k"].dtype == grad.dtype == torch.bfloat16
    assert isinstance(inputs["eps"], float)
    same, _ = case_inputs(family, Case("timex", tuple(SMALL.items()), "fwdbwd"), 3, "cpu")
    assert torch.equal(same["k"].to(torch.bfloat16), inputs["k"])  # the same values, rounded


def test_tolerance_rule(registry):
    timex = registry.family("timex")
    assert timex.tolerance_for("float32") == timex.tolerance
    assert timex.tolerance_for("bfloat16") == pytest.approx(timex.tolerance + 4 * 2**-8)
    assert timex.tolerance_for("float16") == pytest.approx(timex.tolerance + 4 * 2**-11)


def test_bytes_scale_with_the_element_size_and_flops_do_not(registry):
    timex = registry.family("timex")
    fp32 = work_of(timex.work, Case("timex", (("B", 32), ("C", 768), ("T", 768))), timex)
    bf16 = work_of(timex.work, Case("timex", (("B", 32), ("C", 768), ("T", 768)), dtype="bfloat16"), timex)
    assert bf16[0] == fp32[0] and bf16[1] == fp32[1] / 2


def test_a_bfloat16_run_checks_the_baseline_at_its_tolerance_and_says_so_everywhere(registry):
    options = RunOptions(rule=FixedCount(5), warmup=Warmup(1, 0), directions=("fwd", "fwdbwd"),
                         dtypes=("float32", "bfloat16"))
    tasks = [replace(t, variants=()) for t in plan(registry, ["timex"], SMALL, options)]
    results = inline_runner(options, timer_factory=lambda name: FakeTimer()).run(tasks)
    bf16 = [r for r in results if r.case.dtype == "bfloat16"]
    assert [(r.subject, r.case.direction, r.status) for r in bf16] == [("conv1d", "fwd", "ok"),
                                                                     ("conv1d", "fwdbwd", "ok")]
    check = bf16[1].check
    assert check.tolerance == pytest.approx(registry.family("timex").tolerance_for("bfloat16"))
    assert 1e-5 < check.worst < check.tolerance  # really rounded to bfloat16, within its tolerance
    assert [t.title for t in report.tables(results)] == ["timex  B=8,C=3,T=16  float32", "timex  B=8,C=3,T=16  bfloat16"]
    rows = flat_rows(document(results, ENV))
    assert [row["dtype"] for row in rows] == ["float32"] * 2 + ["bfloat16"] * 2


def test_compare_keeps_precisions_apart():
    from cudabench.results.compare.verdicts import compare_documents
    from synthetic import doc, measured

    fp32 = measured("timex", SMALL, "conv1d", 1e-3, role="baseline")
    bf16 = replace(measured("timex", SMALL, "conv1d", 0.5e-3, role="baseline", seed=1),
                   case=replace(fp32.case, dtype="bfloat16"))
    comparison = compare_documents(doc([fp32]), doc([bf16]))
    assert not comparison.rows  # bfloat16 is never judged against float32
    assert [u.key for u in comparison.only_new] == ["timex[B=8,C=3,T=16,bfloat16]/fwd"]


def test_suite_dtypes_key_and_the_command_line(tmp_path):
    from typer.testing import CliRunner

    from cudabench.cli.app import app
    from cudabench.errors import ConfigError
    from cudabench.engine.suite_file import load_suite

    path = tmp_path / "s.toml"
    path.write_text('[[case]]\nkernels = ["timex"]\ndtypes = ["float32", "bfloat16"]\n')
    assert load_suite(path).cases[0].dtypes == ("float32", "bfloat16")
    path.write_text('[[case]]\nkernels = ["timex"]\ndtypes = ["float64"]\n')
    with pytest.raises(ConfigError, match="dtypes"):
        load_suite(path)
    res = CliRunner().invoke(app, ["run", "-k", "add2", "--dtype", "float32,half"])
    assert res.exit_code == 2 and "Unknown dtype 'half'" in res.output and "Traceback" not in res.output


def test_every_shipped_family_declares_its_precisions(registry):
    for family in registry.families:
        assert family.dtypes[0] == "float32"
        for subject in (*family.variants, *family.baselines):
            assert set(subject.dtypes) <= set(family.dtypes), subject.name


def test_precision_skips_are_one_note_not_one_per_case():
    from synthetic import skipped

    results = [replace(skipped("timex", SMALL, name, f"dtype: {name} supports float32 only", direction),
                       case=Case("timex", tuple(SMALL.items()), direction, dtype=dtype))
               for dtype in ("bfloat16", "float16") for direction in ("fwd", "fwdbwd")
               for name in ("timex-v4", "timex-fft")]
    notes = report.notes(results)
    assert notes == ["not run in bfloat16, float16: timex-v4, timex-fft (they do not take it; `cudabench list` "
                     "shows each one's precisions)"]
