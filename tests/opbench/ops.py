"""Ops of a user's package (the code under test: imported only in the subject process)."""


def fused_add(a, b):
    return a + b


def wrong_add(a, b):
    return a - b


def reference(a, b):  # a reference kept beside the op: the judge refuses to import this module
    return a + b


_seen = {}


def memo_add(a, b):
    """Hostile: the first answer for these buffers, again (a cache keyed by where the inputs live)."""
    key = (a.data_ptr(), b.data_ptr())
    if key not in _seen:
        _seen[key] = a + b
    return _seen[key]
