"""`cudabench compare`'s logic on synthetic sample sets: verdicts, regressions and exit codes,
results present on one side only, threshold parsing, and the command's gate and outputs."""

import json
from dataclasses import replace

import numpy as np
import pytest
from typer.testing import CliRunner

from cudabench.cli.app import app
from cudabench.results.compare.bootstrap import bootstrap_medians, verdict
from cudabench.results.compare.render import verdict_text
from cudabench.results.compare.verdicts import compare_documents, parse_threshold
from cudabench.results.exporters.json_document import write_json_atomic
from cudabench.results.records.model import IntegrityCheck
from cudabench.errors import ConfigError
from synthetic import doc, measured, skipped, timex_sweep

SHAPE = {"B": 32, "C": 768, "T": 768}


def one(median, spread=0.01, n=200, seed=0, **kw):
    return doc([measured("timex", SHAPE, "timex-v4", median, spread=spread, n=n, seed=seed, **kw)])


def only_row(old, new, threshold=0.05):
    comparison = compare_documents(old, new, threshold)
    assert len(comparison.rows) == 1
    return comparison, comparison.rows[0]


def test_the_same_file_twice_is_same_everywhere_and_exits_0():
    old = timex_sweep()
    comparison = compare_documents(old, old, 0.05)
    assert len(comparison.rows) == 27 and {r.verdict for r in comparison.rows} == {"same"}
    assert comparison.exit_code == 0 and not comparison.regressions
    assert all(r.ratio == 1.0 and r.low <= 1 <= r.high for r in comparison.rows)


def test_a_rerun_with_fresh_noise_is_same():
    comparison, row = only_row(one(1e-3, seed=1), one(1e-3, seed=2))
    assert row.verdict == "same" and comparison.exit_code == 0


def test_clearly_slower_beyond_the_threshold_is_a_regression_and_exits_1():
    comparison, row = only_row(one(1e-3, seed=1), one(1.2e-3, seed=2))
    assert row.verdict == "slower" and row.regressed and row.ratio == pytest.approx(1.2, rel=0.01)
    assert 1.05 < row.low < row.ratio < row.high
    assert comparison.exit_code == 1 and comparison.regressions == (row,)
    assert verdict_text(row).startswith("slower +20") and verdict_text(row).endswith("REGRESSION")


def test_slower_within_the_threshold_is_not_a_regression():
    comparison, row = only_row(one(1e-3, seed=1), one(1.08e-3, seed=2), threshold=0.10)
    assert row.verdict == "same" and not row.regressed and comparison.exit_code == 0
    comparison, row = only_row(one(1e-3, seed=1), one(1.08e-3, seed=2), threshold=0.05)
    assert row.verdict == "slower" and row.regressed and comparison.exit_code == 1


def test_faster():
    comparison, row = only_row(one(1e-3, seed=1), one(0.7e-3, seed=2))
    assert row.verdict == "faster" and not row.regressed and comparison.exit_code == 0
    assert row.high < 1 and verdict_text(row).startswith("faster -30")


def test_too_noisy_to_say():
    comparison, row = only_row(one(1e-3, spread=0.4, n=12, seed=1), one(1.1e-3, spread=0.4, n=12, seed=2))
    assert row.verdict == "too noisy" and not row.regressed and comparison.exit_code == 0
    assert row.low < 1 < row.high
    assert "old median ±" in row.note and "new median ±" in row.note and "--noise" in row.note  # which side, what to do
    assert row.old_precision > 0.025 and row.new_precision > 0.025


def test_too_few_samples_are_too_noisy_with_a_note():
    _, row = only_row(one(1e-3, n=2), one(2e-3, n=2))
    assert row.verdict == "too noisy" and "fewer than" in row.note


def test_differently_timed_results_are_not_compared_nor_gated():
    comparison = compare_documents(one(1e-3), one(2e-3, timing="events"), 0.05)
    assert not comparison.rows and comparison.exit_code == 0
    assert "not comparable: timed as sync/hot in old, events/hot in new" in comparison.unmeasured[0].reason


def test_results_on_one_side_are_listed_not_dropped():
    a = measured("timex", SHAPE, "timex-v4", 1e-3)
    b = measured("timex", SHAPE, "timex-v3", 1e-3)
    c = measured("timex", SHAPE, "conv1d", 1e-3, role="baseline")
    old = doc([a, b, skipped("timex", {"T": 66}, "timex-v3"), c])
    new = doc([a, skipped("timex", SHAPE, "timex-v3", "build failed: boom"),
               skipped("timex", {"T": 66}, "timex-v3"), measured("timex", {"T": 512}, "timex-v4", 1e-3)])
    comparison = compare_documents(old, new, 0.05)
    assert [(r.subject, r.verdict) for r in comparison.rows] == [("timex-v4", "same")]
    assert [(u.subject, u.reason) for u in comparison.only_old] == [
        ("timex-v3", "SKIP in new: build failed: boom"), ("conv1d", "not in the new results")]
    assert [(u.key, u.reason) for u in comparison.only_new] == [("timex[T=512]/fwd", "not in the old results")]
    assert [u.key for u in comparison.unmeasured] == ["timex[T=66]/fwd"]
    assert comparison.exit_code == 1 and [p.split(" was ")[0] for p in comparison.problems] == [
        "missing in new: timex[B=32,C=768,T=768]/fwd timex-v3", "missing in new: timex[B=32,C=768,T=768]/fwd conv1d"]
    assert compare_documents(old, new, 0.05, allow_missing=True).exit_code == 0


def test_verdicts_are_deterministic():
    old, new = one(1e-3, spread=0.05, n=30, seed=1), one(1.03e-3, spread=0.05, n=30, seed=2)
    assert compare_documents(old, new).rows == compare_documents(old, new).rows


@pytest.mark.parametrize("low, high, said", [
    (0.99, 1.01, "same"), (1.01, 1.04, "same"), (1.06, 1.10, "slower"), (1.01, 1.06, "slower"),
    (0.80, 0.90, "faster"), (0.90, 1.10, "too noisy"), (1 / 1.05, 1.05, "same"),
])
def test_verdict_rule(low, high, said):
    assert verdict(low, high, 0.05) == said


def test_fast_bootstrap_medians_match_brute_force():
    xs = np.arange(1.0, 7.0)
    fast = bootstrap_medians(xs, np.random.default_rng(0), 100_000)
    brute = np.median(xs[np.random.default_rng(1).integers(0, 6, (100_000, 6))], axis=1)
    for value in np.unique(brute):
        assert np.mean(fast == value) == pytest.approx(np.mean(brute == value), abs=0.006)


@pytest.mark.parametrize("text, value", [("5%", 0.05), ("0.05", 0.05), ("12.5%", 0.125), ("0", 0.0),
                                         (" 150% ", 1.5)])
def test_threshold_parsing(text, value):
    assert parse_threshold(text) == pytest.approx(value)


@pytest.mark.parametrize("text, fragment", [("-5%", "non-negative"), ("5", "ambiguous"), ("abc", "Cannot use"),
                                            ("nan", "Cannot use"), ("", "Cannot use")])
def test_bad_thresholds(text, fragment):
    with pytest.raises(ConfigError, match=fragment):
        parse_threshold(text)


def test_non_numeric_samples_are_unmeasured_not_a_crash():
    bad = one(1e-3)
    bad["results"][0]["measurement"]["samples"] = ["fast", "slow"]
    comparison = compare_documents(bad, one(1e-3), 0.05)
    assert not comparison.rows and comparison.only_new
    assert comparison.problems == ("nothing measured in old: the old results have no measured result (1 ok)",)


def test_an_invalid_or_crashed_result_in_new_fails_the_gate_and_is_never_compared():
    shape = {"B": 32, "C": 768, "T": 768}
    old = doc([measured("timex", shape, "timex-v4", 1e-3), measured("timex", shape, "conv1d", 4e-3, role="baseline")])
    cheat = replace(measured("timex", shape, "timex-v4", 1e-6),
                    integrity=(IntegrityCheck("stale-output", "fail", "error 1.1"),))
    crashed = replace(skipped("timex", shape, "conv1d"), skipped="", role="baseline",
                      error="CUDA error: an illegal memory access was encountered")
    comparison = compare_documents(old, doc([cheat, crashed]), 0.05)
    assert comparison.rows == () and comparison.exit_code == 1
    reasons = {u.subject: u.reason for u in comparison.failed}
    assert reasons["timex-v4"] == "INVALID: stale-output: error 1.1"
    assert reasons["conv1d"].startswith("ERROR: CUDA error")


# ---- the gate: nothing measured, missing or not measured now, INVALID --------------------------------

def cheat(median=1e-6):
    """timex-v4 timed, but caught returning stale output: INVALID."""
    return replace(measured("timex", SHAPE, "timex-v4", median),
                   integrity=(IntegrityCheck("stale-output", "fail", "error 1.1"),))


def crashed():
    return replace(skipped("timex", SHAPE, "timex-v4"), skipped="", error="CUDA error: an illegal memory access")


def wrong():
    """Timed under --force although its output is wrong: FAIL, with samples."""
    from cudabench.results.records.model import Check

    return replace(measured("timex", SHAPE, "timex-v4", 1e-3), check=Check((("out", 0.5),), 1e-5))


V3 = measured("timex", SHAPE, "timex-v3", 2e-3, seed=5)


@pytest.mark.parametrize("new, why", [
    (doc([]), "nothing measured in new: the new results have no measured result (no results at all)"),
    (doc([skipped("timex", SHAPE, "timex-v4", "build failed: nvcc")]), "(1 SKIP)"),
    (doc([skipped("timex", SHAPE, "timex-v4"), crashed(), wrong()]), "(1 SKIP, 1 ERROR, 1 FAIL)"),
])
def test_new_with_nothing_measured_fails_even_with_allow_missing(new, why):
    for allow in (False, True):
        comparison = compare_documents(one(1e-3), new, 0.05, allow_missing=allow)
        assert comparison.exit_code == 1 and why in comparison.problems[0]


def test_old_with_nothing_measured_fails():
    comparison = compare_documents(doc([]), one(1e-3), 0.05, allow_missing=True)
    assert comparison.exit_code == 1 and comparison.problems[0].startswith("nothing measured in old")


@pytest.mark.parametrize("now, reason", [
    (None, "not in the new results"),
    (skipped("timex", SHAPE, "timex-v4", "build failed: nvcc"), "SKIP in new: build failed: nvcc"),
    (wrong(), "FAIL in new"),
])
def test_a_subject_measured_in_old_but_not_now_fails_unless_allowed(now, reason):
    old = doc([measured("timex", SHAPE, "timex-v4", 1e-3), V3])
    new = doc([V3] + ([now] if now else []))
    comparison = compare_documents(old, new, 0.05)
    assert comparison.exit_code == 1 and comparison.problems == (
        f"missing in new: timex[B=32,C=768,T=768]/fwd timex-v4 was measured in old, now {reason}",)
    allowed = compare_documents(old, new, 0.05, allow_missing=True)
    assert allowed.exit_code == 0 and allowed.only_old[0].reason == reason and not allowed.problems


def test_a_wrong_result_is_never_compared():
    comparison = compare_documents(one(1e-3), doc([wrong()]), 0.05)
    assert comparison.rows == () and comparison.only_old[0].reason == "FAIL in new"


@pytest.mark.parametrize("side", ["old", "new"])
def test_an_invalid_result_on_either_side_fails_even_with_allow_missing(side):
    docs = {"old": doc([cheat(), V3]), "new": doc([measured("timex", SHAPE, "timex-v4", 1e-3), V3])}
    if side == "new":
        docs = {"old": docs["new"], "new": doc([cheat(), V3])}
    comparison = compare_documents(docs["old"], docs["new"], 0.05, allow_missing=True)
    assert comparison.exit_code == 1
    where = " in old" if side == "old" else ""
    assert comparison.problems == (f"failed: timex[B=32,C=768,T=768]/fwd timex-v4: INVALID{where}: stale-output: "
                                   "error 1.1",)


def test_a_crash_in_new_fails_even_with_allow_missing_and_is_said_once():
    comparison = compare_documents(doc([measured("timex", SHAPE, "timex-v4", 1e-3), V3]), doc([crashed(), V3]),
                                   0.05, allow_missing=False)
    assert comparison.exit_code == 1 and len(comparison.problems) == 1
    assert comparison.problems[0].startswith("failed: timex[B=32,C=768,T=768]/fwd timex-v4: ERROR: CUDA error")
    assert compare_documents(doc([V3]), doc([crashed(), V3]), 0.05, allow_missing=True).exit_code == 1


# ---- the command: exit codes, --allow-missing, --json and --markdown ----------------------------------

runner = CliRunner()


def files(tmp_path, old, new):
    paths = tmp_path / "old.json", tmp_path / "new.json"
    for path, data in zip(paths, (old, new)):
        write_json_atomic(path, data)
    return [str(p) for p in paths]


def compare_cli(tmp_path, old, new, *options):
    res = runner.invoke(app, ["compare", *files(tmp_path, old, new), *map(str, options)])
    assert "Traceback" not in res.output and (res.exception is None or isinstance(res.exception, SystemExit))
    return res


def said(res):
    """The output as one line: the console wraps long messages."""
    return " ".join(res.output.split())


def test_cli_new_without_results_exits_1_and_says_why(tmp_path):
    res = compare_cli(tmp_path, one(1e-3), doc([]))
    assert res.exit_code == 1 and "FAIL nothing measured in new" in said(res)


def test_cli_only_skipped_or_failed_in_new_exits_1(tmp_path):
    res = compare_cli(tmp_path, one(1e-3), doc([skipped("timex", SHAPE, "timex-v4"), wrong()]), "--allow-missing")
    assert res.exit_code == 1 and "no measured result (1 SKIP, 1 FAIL)" in said(res)


def test_cli_a_missing_case_exits_1_and_0_with_allow_missing(tmp_path):
    old, new = doc([measured("timex", SHAPE, "timex-v4", 1e-3), V3]), doc([V3])
    res = compare_cli(tmp_path, old, new)
    assert res.exit_code == 1 and "missing in new: timex[B=32,C=768,T=768]/fwd timex-v4" in said(res)
    res = compare_cli(tmp_path, old, new, "--allow-missing")
    assert res.exit_code == 0, res.output
    assert "only in old (allowed): timex[B=32,C=768,T=768]/fwd timex-v4: not in the new results" in said(res)


def test_cli_invalid_exits_1_even_with_allow_missing(tmp_path):
    res = compare_cli(tmp_path, doc([measured("timex", SHAPE, "timex-v4", 1e-3), V3]), doc([cheat(), V3]),
                      "--allow-missing")
    assert res.exit_code == 1 and "INVALID: stale-output: error 1.1" in said(res)


def slower_by_a_fifth(tmp_path, *options):
    old = doc([measured("timex", SHAPE, "timex-v4", 1e-3, seed=1), V3])
    new = doc([measured("timex", SHAPE, "timex-v4", 1.2e-3, seed=2), skipped("timex", SHAPE, "timex-v3")])
    return compare_cli(tmp_path, old, new, *options)


def test_cli_json_verdicts_to_a_file(tmp_path):
    res = slower_by_a_fifth(tmp_path, "--json", tmp_path / "ci" / "verdicts.json")
    assert res.exit_code == 1 and "new vs old" in said(res)   # the table still on the terminal
    verdicts = json.loads((tmp_path / "ci" / "verdicts.json").read_text())
    assert (verdicts["schema"], verdicts["threshold"], verdicts["exit_code"]) == ("cudabench.compare", 0.05, 1)
    (row,) = verdicts["rows"]
    assert (row["key"], row["subject"], row["role"], row["verdict"], row["regressed"]) == (
        "timex[B=32,C=768,T=768]/fwd", "timex-v4", "variant", "slower", True)
    assert row["old_median"] == pytest.approx(1e-3, rel=0.01) and row["new_median"] == pytest.approx(1.2e-3, rel=0.01)
    assert row["old_n"] == row["new_n"] == 200 and row["low"] < row["ratio"] < row["high"]
    assert verdicts["only_old"] == [{"key": "timex[B=32,C=768,T=768]/fwd", "subject": "timex-v3",
                                     "reason": "SKIP in new: constraint: T must be a multiple of 4", "gpu": ""}]
    assert verdicts["failed"] == [] and len(verdicts["problems"]) == 2


def test_cli_json_to_standard_output_is_only_json(tmp_path):
    res = compare_cli(tmp_path, one(1e-3, seed=1), one(1e-3, seed=2), "--json", "-")
    assert res.exit_code == 0
    verdicts = json.loads(res.stdout)   # the table and notes went to standard error
    assert verdicts["exit_code"] == 0 and verdicts["rows"][0]["verdict"] == "same" and verdicts["problems"] == []
    assert "new vs old" in res.stderr


def test_cli_markdown_to_a_file_and_to_standard_output(tmp_path):
    res = slower_by_a_fifth(tmp_path, "--markdown", tmp_path / "comment.md")
    text = (tmp_path / "comment.md").read_text()
    assert res.exit_code == 1 and text.startswith("**cudabench compare**: **FAIL** (exit 1) · threshold 5%")
    table = [line for line in text.splitlines() if line.startswith("|")]
    assert table[0] == "| case | kernel | old median | new median | new/old | verdict | note |"
    assert table[2].startswith("| timex[B=32,C=768,T=768]/fwd | timex-v4 | 1.000 ms ±0.1% | 1.20") and "REGRESSION**" in table[2]
    assert "- missing in new: timex[B=32,C=768,T=768]/fwd timex-v3 was measured in old" in text
    res = slower_by_a_fifth(tmp_path, "--markdown", "-")
    assert res.stdout == text and "new vs old" in res.stderr


def test_cli_both_outputs_on_standard_output_is_refused(tmp_path):
    res = compare_cli(tmp_path, one(1e-3), one(1e-3), "--json", "-", "--markdown", "-")
    assert res.exit_code == 2 and "Only one of --json and --markdown" in said(res)


def test_cli_an_output_that_cannot_be_written_is_refused_before_comparing(tmp_path):
    res = compare_cli(tmp_path, one(1e-3), one(1e-3), "--json", "/dev/null")
    assert res.exit_code == 2 and "/dev/null: it is a character device" in said(res) and "new vs old" not in res.output


def on(gpu, result):
    return replace(result, gpu=gpu)


def test_results_from_several_gpu_models_are_matched_per_model():
    h100, h200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"
    old = doc([on(h100, measured("timex", SHAPE, "timex-v4", 1e-3)), on(h200, measured("timex", SHAPE, "timex-v4", 0.8e-3))])
    new = doc([on(h200, measured("timex", SHAPE, "timex-v4", 1e-3, seed=5)),
               on(h100, measured("timex", SHAPE, "timex-v4", 1e-3, seed=6))])
    comparison = compare_documents(old, new)
    verdicts = {r.gpu: (r.verdict, r.regressed) for r in comparison.rows}
    assert verdicts == {h100: ("same", False), h200: ("slower", True)}  # not H100's old against H200's new
    assert comparison.problems == ("regression beyond 5%: timex-v4 timex[B=32,C=768,T=768]/fwd on NVIDIA H200",)


def test_a_gpu_model_measured_in_old_only_is_missing_in_new():
    old = doc([on("A", measured("timex", SHAPE, "timex-v4", 1e-3)), on("B", measured("timex", SHAPE, "timex-v4", 1e-3))])
    new = doc([on("A", measured("timex", SHAPE, "timex-v4", 1e-3, seed=3))])
    comparison = compare_documents(old, new)
    assert [(u.subject, u.gpu) for u in comparison.only_old] == [("timex-v4", "B")] and comparison.exit_code == 1


def test_one_model_against_another_is_a_deliberate_comparison_across_gpus():
    from cudabench.results.records.model import Environment

    new_env = replace(Environment(), gpu="NVIDIA H200")
    comparison = compare_documents(one(1e-3), doc([measured("timex", SHAPE, "timex-v4", 0.7e-3)], env=new_env))
    assert [(r.verdict, r.gpu) for r in comparison.rows] == [("faster", "")]


# ---- peak memory ---------------------------------------------------------------------------------------

def with_memory(median, peak, seed):
    return doc([replace(measured("timex", SHAPE, "timex-v4", median, seed=seed), peak_memory=peak)])


MIB = 1 << 20


@pytest.mark.parametrize("old_bytes, new_bytes, threshold, regressed", [
    (100 * MIB, 120 * MIB, 0.10, True),        # +20 %: beyond 10 %
    (100 * MIB, 105 * MIB, 0.10, False),       # +5 %: within
    (100 * MIB, 120 * MIB, 0.25, False),       # its own threshold, not the time's
    (2 * MIB, int(2.9 * MIB), 0.10, False),    # +45 % but under 1 MiB: allocator rounding, small scratch
    (0, 2 * MIB, 0.10, True),                  # from nothing to 2 MiB
    (-1, 500 * MIB, 0.10, False),              # not recorded in old: no verdict
    (120 * MIB, 100 * MIB, 0.10, False),       # less memory is never a regression
])
def test_peak_memory_regresses_on_its_own_threshold(old_bytes, new_bytes, threshold, regressed):
    comparison = compare_documents(with_memory(1e-3, old_bytes, 1), with_memory(1e-3, new_bytes, 2), 0.05,
                                   memory_threshold=threshold)
    row = comparison.rows[0]
    assert row.verdict == "same" and not row.regressed  # the time did not change
    assert (row.old_memory, row.new_memory, row.memory_regressed) == (old_bytes, new_bytes, regressed)
    assert comparison.exit_code == (1 if regressed else 0)
    assert any("peak memory regression" in p for p in comparison.problems) == regressed


def test_cli_memory_threshold_gates_and_shows_the_change(tmp_path):
    old, new = with_memory(1e-3, 100 * MIB, 1), with_memory(1e-3, 150 * MIB, 2)
    res = compare_cli(tmp_path, old, new, "--markdown", tmp_path / "c.md")
    assert res.exit_code == 1 and "peak memory regression beyond 10%: timex-v4" in said(res)
    assert "100 MiB → 150 MiB (+50.0%) **REGRESSION**" in (tmp_path / "c.md").read_text()
    res = compare_cli(tmp_path, old, new, "--memory-threshold", "60%", "--json", "-")
    assert res.exit_code == 0 and json.loads(res.stdout)["memory_threshold"] == 0.6
    assert compare_cli(tmp_path, old, new, "--memory-threshold", "lots").exit_code == 2


def test_cli_says_when_a_side_did_not_finish(tmp_path):
    """A run ended by Ctrl-C is kept with complete = false: compare names it, and what it did not
    reach still fails the gate as missing."""
    old = doc([measured("timex", SHAPE, "timex-v4", 1e-3), V3])
    cut = {**doc([V3]), "complete": False}
    res = compare_cli(tmp_path, old, cut)
    assert res.exit_code == 1 and "the new run" in said(res) and "did not finish" in said(res)
    assert "missing in new: timex[B=32,C=768,T=768]/fwd timex-v4" in said(res)
    assert "did not finish" not in said(compare_cli(tmp_path, old, old))


def test_one_file_given_as_both_runs_is_refused_not_passed(tmp_path):
    """A CI gate whose two variables name one file would pass every time."""
    old, _ = files(tmp_path, one(1e-3), one(1e-3))
    link = tmp_path / "link.json"
    link.symlink_to(old)
    for new in (old, str(link)):
        res = runner.invoke(app, ["compare", old, new])
        assert res.exit_code == 2 and "are the same file" in res.output and "Traceback" not in res.output


def test_a_bad_memory_threshold_is_named_as_such(tmp_path):
    res = runner.invoke(app, ["compare", *files(tmp_path, one(1e-3), one(1e-3)), "--memory-threshold", "abc"])
    assert res.exit_code == 2 and "--memory-threshold 'abc'" in res.output and "--threshold 5%" not in res.output
