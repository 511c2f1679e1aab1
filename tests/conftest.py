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
