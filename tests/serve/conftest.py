"""One torch thread for these tests: the tiny model's steps are microseconds of work, and on a
loaded shared CPU two OpenMP threads spin against each other (100x slower measured)."""

import pytest


@pytest.fixture(autouse=True)
def _one_torch_thread():
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
