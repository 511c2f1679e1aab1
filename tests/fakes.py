"""A timer for CPU tests: no clock, samples from a list (cycled), every call made as a real timer
would make it (the judge reads the last call's outputs when asked to keep them)."""

import itertools


class FakeTimer:
    name = "sync"
    last = None

    def __init__(self, values=None, batch=1):
        # default: 1, 2, ... 5 µs, again and again (a steady subject: later calls look like earlier ones)
        self.values = itertools.cycle(values if values is not None else [i * 1e-6 for i in range(1, 6)])
        self.batch = batch
        self.calls = 0
        self.prepared = None

    def prepare(self, call, estimate):
        self.prepared = estimate

    def samples(self, call, count, before_each=None, keep=False):
        out = []
        for _ in range(count):
            if before_each:
                before_each()
            value = call()
            self.calls += 1
            self.last = value if keep else None
            out.append(next(self.values))
        return out
