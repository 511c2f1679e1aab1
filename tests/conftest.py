import os
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch


def pytest_collection_modifyitems(config, items):
    """GPU tests (marked `gpu`) skip cleanly where there is no CUDA device."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def registry():
    from cudabench.spec.registry import discover

    return discover()


@pytest.fixture(autouse=True)
def _own_durations_file(tmp_path_factory, monkeypatch):
    """What subjects took is kept per machine (cudabench/engine/durations.py): each test its own file,
    so that no test's order depends on another's, nor on the user's runs."""
    import cudabench.engine.durations as durations

    path = tmp_path_factory.mktemp("durations") / "durations.json"
    monkeypatch.setattr(durations, "durations_file", lambda: path)


@pytest.fixture(scope="module")
def pool():
    """Threads that only wait on compilers and checkers (the emulator tests): one per core."""
    executor = ThreadPoolExecutor(os.cpu_count() or 2)
    yield executor
    executor.shutdown(cancel_futures=True)
