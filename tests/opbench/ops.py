"""Ops of a user's package (the code under test: imported only in the subject process)."""


def fused_add(a, b):
    return a + b


def wrong_add(a, b):
    return a - b


def reference(a, b):  # a reference kept beside the op: the judge refuses to import this module
    return a + b
