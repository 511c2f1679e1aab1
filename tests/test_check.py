"""The correctness gate on the CPU: poisoned outputs, NaN, wrong values, gradients."""

import torch

from cudabench.measure.check import check_workload, reference_results, relative_error
from cudabench.spec.family import empty_like
from cudabench.measure.workload import make_workload


def test_relative_error():
    ref = torch.tensor([3.0, 4.0], dtype=torch.float64)
    assert relative_error(ref.float(), ref) == 0
    assert abs(relative_error(torch.tensor([3.0, 4.5]), ref) - 0.1) < 1e-12
    assert relative_error(torch.tensor([float("nan"), 4.0]), ref) != relative_error(ref, ref)  # NaN
    assert relative_error(torch.zeros(3), ref) == float("inf")  # shape mismatch


def test_an_output_the_kernel_never_writes_fails_the_check(registry):
    family = registry.family("add2")
    inputs = family.make_inputs({"n": 64}, torch.Generator().manual_seed(0), "cpu")

    def lazy_add(a, b):  # forgets the last element, as an off-by-one grid would
        c = empty_like(a)
        c[:-1] = a[:-1] + b[:-1]
        return c

    ref = reference_results(family, inputs, "fwd")
    check = check_workload(make_workload(lazy_add, inputs, "fwd"), ref, family.tolerance)
    # its memory was poisoned first (NaN where PyTorch's allocator hands the block back, garbage else)
    assert not check.passed


def test_a_correct_op_passes_and_a_wrong_one_fails(registry):
    family = registry.family("add2")
    inputs = family.make_inputs({"n": 64}, torch.Generator().manual_seed(0), "cpu")
    ref = reference_results(family, inputs, "fwd")
    good = check_workload(make_workload(lambda a, b: a + b, inputs, "fwd"), ref, family.tolerance)
    bad = check_workload(make_workload(lambda a, b: a + 1.001 * b, inputs, "fwd"), ref, family.tolerance)
    assert good.passed and good.worst < 1e-7
    assert not bad.passed


def test_gradients_are_checked_too(registry):
    family = registry.family("timex")
    inputs = family.make_inputs({"B": 2, "C": 3, "T": 8}, torch.Generator().manual_seed(0), "cpu")
    g = torch.rand(2, 3, 8)
    ref = reference_results(family, inputs, "fwdbwd", g)

    def wrong_backward(w, k, eps):  # the right forward value, but g leaks into gk
        return family.reference(w, k, eps) + (k - k.detach())

    check = check_workload(make_workload(wrong_backward, inputs, "fwdbwd", family.grad_inputs, g), ref,
                           family.tolerance)
    errors = dict(check.errors)
    assert errors["out"] < 1e-6 and errors["gk"] > 1e-3 and not check.passed
